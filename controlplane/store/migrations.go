package store

// migrations are applied in order, once each, at start. The SQL is the subset SQLite and
// PostgreSQL share: TEXT ids, BIGINT unix-millisecond times, INTEGER booleans, JSON in TEXT.
// Never edit an applied migration; add the next one.
var migrations = []string{
	// 1: accounts, projects, members, keys, sinks, settings.
	`CREATE TABLE users (
		id            TEXT PRIMARY KEY,
		email         TEXT NOT NULL UNIQUE,
		password_hash TEXT NOT NULL,
		created_at    BIGINT NOT NULL
	);
	CREATE TABLE projects (
		id             TEXT PRIMARY KEY,
		name           TEXT NOT NULL,
		owner_id       TEXT NOT NULL REFERENCES users(id),
		pipeline       TEXT NOT NULL,
		signing_secret TEXT NOT NULL,
		version        BIGINT NOT NULL,
		created_at     BIGINT NOT NULL,
		updated_at     BIGINT NOT NULL
	);
	CREATE TABLE members (
		project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
		user_id    TEXT NOT NULL REFERENCES users(id),
		role       TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		PRIMARY KEY (project_id, user_id)
	);
	CREATE INDEX members_user ON members(user_id);
	CREATE TABLE api_keys (
		id           TEXT PRIMARY KEY,
		project_id   TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
		name         TEXT NOT NULL,
		prefix       TEXT NOT NULL,
		hash         TEXT NOT NULL UNIQUE,
		scope        TEXT NOT NULL,
		source_id    TEXT NOT NULL DEFAULT '',
		created_at   BIGINT NOT NULL,
		last_used_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX api_keys_project ON api_keys(project_id);
	CREATE TABLE sinks (
		id         TEXT PRIMARY KEY,
		project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
		config     TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL
	);
	CREATE INDEX sinks_project ON sinks(project_id);
	CREATE TABLE settings (
		name  TEXT PRIMARY KEY,
		value TEXT NOT NULL
	)`,
	// 2: push sources. The ingest key is kept in clear: it is part of the source's URL and
	// the mirror's key for it (the secret that authenticates posts is the source's
	// ingest-scoped API key in api_keys, stored hashed). Its full configuration is JSON.
	`CREATE TABLE sources (
		id         TEXT PRIMARY KEY,
		project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
		name       TEXT NOT NULL,
		ingest_key TEXT NOT NULL UNIQUE,
		config     TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		UNIQUE (project_id, name)
	);
	CREATE INDEX api_keys_source ON api_keys(source_id)`,
	// 3: a project's own ingest rate limit (records per second, burst); 0 per second is
	// the deployment's default.
	`ALTER TABLE projects ADD COLUMN ingest_rate_per_second DOUBLE PRECISION NOT NULL DEFAULT 0;
	ALTER TABLE projects ADD COLUMN ingest_rate_burst BIGINT NOT NULL DEFAULT 0`,
	// 4: personal access tokens (osp_...), for scripts and MCP clients; stored hashed.
	`CREATE TABLE access_tokens (
		id           TEXT PRIMARY KEY,
		user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
		name         TEXT NOT NULL,
		prefix       TEXT NOT NULL,
		hash         TEXT NOT NULL UNIQUE,
		created_at   BIGINT NOT NULL,
		expires_at   BIGINT NOT NULL,
		last_used_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX access_tokens_user ON access_tokens(user_id)`,
	// 5: dashboard sessions get a table of their own: kept among the access tokens (ses_
	// ids) they had to be filtered out of every token listing and revocation, and a slip
	// there would show or revoke a session as a token. Those rows go; their users log in
	// again. substr, not LIKE, because _ is a LIKE wildcard.
	`CREATE TABLE sessions (
		id           TEXT PRIMARY KEY,
		user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
		hash         TEXT NOT NULL UNIQUE,
		created_at   BIGINT NOT NULL,
		expires_at   BIGINT NOT NULL,
		last_seen_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX sessions_user ON sessions(user_id, created_at);
	DELETE FROM access_tokens WHERE substr(id, 1, 4) = 'ses_'`,
	// 6: the OAuth authorization server for MCP clients (store/oauth.go): registered
	// clients, pending authorization requests, codes, grants and their tokens (codes and
	// tokens stored hashed). Deleting a grant deletes its tokens.
	`CREATE TABLE oauth_clients (
		id            TEXT PRIMARY KEY,
		name          TEXT NOT NULL,
		redirect_uris TEXT NOT NULL,
		created_at    BIGINT NOT NULL,
		last_used_at  BIGINT NOT NULL DEFAULT 0
	);
	CREATE TABLE oauth_requests (
		id             TEXT PRIMARY KEY,
		client_id      TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
		redirect_uri   TEXT NOT NULL,
		code_challenge TEXT NOT NULL,
		state          TEXT NOT NULL,
		scope          TEXT NOT NULL,
		resource       TEXT NOT NULL,
		created_at     BIGINT NOT NULL,
		expires_at     BIGINT NOT NULL
	);
	CREATE INDEX oauth_requests_expires ON oauth_requests(expires_at);
	CREATE TABLE oauth_grants (
		id           TEXT PRIMARY KEY,
		user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
		client_id    TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
		scope        TEXT NOT NULL,
		resource     TEXT NOT NULL,
		created_at   BIGINT NOT NULL,
		last_used_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX oauth_grants_user ON oauth_grants(user_id, created_at);
	CREATE INDEX oauth_grants_client ON oauth_grants(client_id);
	CREATE TABLE oauth_codes (
		hash           TEXT PRIMARY KEY,
		user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
		client_id      TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
		redirect_uri   TEXT NOT NULL,
		code_challenge TEXT NOT NULL,
		scope          TEXT NOT NULL,
		resource       TEXT NOT NULL,
		grant_id       TEXT NOT NULL DEFAULT '',
		created_at     BIGINT NOT NULL,
		expires_at     BIGINT NOT NULL
	);
	CREATE INDEX oauth_codes_expires ON oauth_codes(expires_at);
	CREATE TABLE oauth_tokens (
		hash       TEXT PRIMARY KEY,
		kind       TEXT NOT NULL,
		grant_id   TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL,
		rotated_at BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
	CREATE INDEX oauth_tokens_expires ON oauth_tokens(expires_at)`,
	// 7: an account's own limit on the projects it owns (NULL: the deployment's
	// SVC_MAX_PROJECTS_PER_ACCOUNT), set by the operator with `accounts set-limit`.
	`ALTER TABLE users ADD COLUMN max_projects BIGINT;
	CREATE INDEX projects_owner ON projects(owner_id)`,
	// 8: revoked credentials whose console tokens may still be alive (store/revocations.go),
	// kept until those tokens have expired: a revocation NATS could not take when it was
	// made is published from here, by a later retry or by the next control plane's start.
	`CREATE TABLE revocations (
		credential_id TEXT PRIMARY KEY,
		revoked_at    BIGINT NOT NULL,
		expires_at    BIGINT NOT NULL,
		published_at  BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX revocations_expires ON revocations(expires_at)`,
	// 9: the pipeline's own version and history: projects.version counts every
	// change (sinks, members) and stays the mirror's; pipeline_version counts changes of
	// the pipeline's content only, each kept in pipeline_versions with who saved it
	// (store/versions.go, the newest MaxPipelineVersions per project). A project's
	// current pipeline becomes its version 1, saved by no one known. agent_since is when
	// the agent URL last went from empty to set (unix ms, 0: never), where the pipeline
	// starts consuming.
	`ALTER TABLE projects ADD COLUMN pipeline_version BIGINT NOT NULL DEFAULT 1;
	ALTER TABLE projects ADD COLUMN agent_since BIGINT NOT NULL DEFAULT 0;
	CREATE TABLE pipeline_versions (
		project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
		version    BIGINT NOT NULL,
		pipeline   TEXT NOT NULL,
		saved_by   TEXT NOT NULL DEFAULT '',
		saved_at   BIGINT NOT NULL,
		restored_from BIGINT NOT NULL DEFAULT 0,
		PRIMARY KEY (project_id, version)
	);
	INSERT INTO pipeline_versions (project_id, version, pipeline, saved_by, saved_at)
		SELECT id, 1, pipeline, '', updated_at FROM projects`,
	// 10: backlog requests (store/backlogs.go): a range of a project's raw stream
	// a user chose to send to the agent, with the preview's numbers. The mirror publishes
	// the latest from here. prev_id chains each to the one before it (unique per project),
	// so two starts from the same state cannot both be stored. generation is the mirror's
	// (NATS's incarnation) when it was asked for: after a wipe its sequence numbers name
	// other records, and it is not published again.
	`CREATE TABLE backlogs (
		id           TEXT PRIMARY KEY,
		project_id   TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
		prev_id      TEXT NOT NULL,
		first_seq    BIGINT NOT NULL,
		last_seq     BIGINT NOT NULL,
		records      BIGINT NOT NULL,
		matched      BIGINT NOT NULL,
		calls        BIGINT NOT NULL,
		requested_at BIGINT NOT NULL,
		requested_by TEXT NOT NULL,
		generation   TEXT NOT NULL,
		UNIQUE (project_id, prev_id)
	)`,
	// 11: agent_since_seq is the last sequence of the project's raw stream when
	// agent_since was recorded (0: not recorded): the pipeline starts right after it,
	// exactly, where agent_since's clock needs a margin.
	`ALTER TABLE projects ADD COLUMN agent_since_seq BIGINT NOT NULL DEFAULT 0`,
	// 12: email. email_verified_at is when the account proved it receives mail at its
	// address (unix ms, 0: never; accounts from before email could not, so they start
	// unverified). email_tokens are the one-time links mailed for verification and
	// password reset, stored hashed and deleted when used. invitations are pending
	// memberships for an address, accepted once through a link whose secret is stored
	// hashed; one per project and address (inviting again replaces it).
	`ALTER TABLE users ADD COLUMN email_verified_at BIGINT NOT NULL DEFAULT 0;
	CREATE TABLE email_tokens (
		hash       TEXT PRIMARY KEY,
		kind       TEXT NOT NULL,
		user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
		email      TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL
	);
	CREATE INDEX email_tokens_user ON email_tokens(user_id, kind);
	CREATE INDEX email_tokens_expires ON email_tokens(expires_at);
	CREATE TABLE invitations (
		id         TEXT PRIMARY KEY,
		project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
		email      TEXT NOT NULL,
		role       TEXT NOT NULL,
		hash       TEXT NOT NULL UNIQUE,
		invited_by TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL,
		UNIQUE (project_id, email)
	);
	CREATE INDEX invitations_expires ON invitations(expires_at)`,
	// 13: scoped keys and revocable logins. api_keys.scopes lists what a project key may
	// do (comma-separated ingest, results, read; '': all three, the keys made before
	// scopes). A personal access token may be limited to some projects (project_ids,
	// comma-separated; '': all of its owner's) and to reading (read_only).
	// users.login_generation is named by every login token and by the console tokens
	// those mint: "log out everywhere" raises it, which ends them all.
	`ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT '';
	ALTER TABLE access_tokens ADD COLUMN project_ids TEXT NOT NULL DEFAULT '';
	ALTER TABLE access_tokens ADD COLUMN read_only INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE users ADD COLUMN login_generation BIGINT NOT NULL DEFAULT 0`,
	// 14: the audit log (store/audit.go): who changed what in a project or an account,
	// with which credential, from where, and the change with its secrets redacted. No
	// foreign keys: the record of a project's or member's removal outlives them, until
	// the retention sweep. dedupe is set only where one action arrives more than once
	// (a replay's jobs seen by every control plane); NULLs never collide.
	`CREATE TABLE audit_events (
		id          TEXT PRIMARY KEY,
		at          BIGINT NOT NULL,
		project_id  TEXT NOT NULL DEFAULT '',
		account_id  TEXT NOT NULL DEFAULT '',
		actor_id    TEXT NOT NULL DEFAULT '',
		actor_email TEXT NOT NULL DEFAULT '',
		cred_kind   TEXT NOT NULL DEFAULT '',
		cred_id     TEXT NOT NULL DEFAULT '',
		action      TEXT NOT NULL,
		target      TEXT NOT NULL DEFAULT '',
		addr        TEXT NOT NULL DEFAULT '',
		changes     TEXT NOT NULL DEFAULT '',
		dedupe      TEXT UNIQUE
	);
	CREATE INDEX audit_events_project ON audit_events(project_id, at, id);
	CREATE INDEX audit_events_account ON audit_events(account_id, at, id);
	CREATE INDEX audit_events_at ON audit_events(at)`,
	// 15: single sign-on (store/sso.go): the email domains whose people join a project as
	// members when they log in through the instance's OpenID provider.
	`CREATE TABLE project_sso_domains (
		project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
		domain     TEXT NOT NULL,
		PRIMARY KEY (project_id, domain)
	);
	CREATE INDEX project_sso_domains_domain ON project_sso_domains(domain)`,
	// 16: the usage and failure notices mailed to owners (store/noticemail.go): a row per
	// notice and recipient, inserted before the mail goes, so that of several control
	// planes watching the same buckets only the one whose insert wins sends it.
	`CREATE TABLE notice_mails (
		notice  TEXT PRIMARY KEY,
		sent_at BIGINT NOT NULL
	);
	CREATE INDEX notice_mails_sent ON notice_mails(sent_at)`,
	// 17: single sign-on (store/sso.go): the provider's subject an account was first linked
	// to, so another subject with the same address (a reassigned mailbox, or a provider
	// admin who marks any address verified) is refused; and the SSO joins a project made,
	// so a member removed from it is not joined again at their next login.
	`ALTER TABLE users ADD COLUMN sso_subject TEXT NOT NULL DEFAULT '';
	CREATE TABLE project_sso_joins (
		project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
		user_id    TEXT NOT NULL,
		PRIMARY KEY (project_id, user_id)
	)`,
}
