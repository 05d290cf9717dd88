import { useId, useState } from 'preact/hooks';
import { api, canWrite, type Member, type Project, type Session } from '../api';
import { useAction, useConfirmRemoval, useLoad } from '../hooks';
import { RemovableTable } from '../removal';
import { navigate } from '../router';
import { ErrorMessage, Field, LoadStatus, Notice, PageHeader, When } from '../ui';

type Invitation = {
  id: string;
  email: string;
  role: string;
  invited_by_email?: string;
  created_at: string;
  expires_at: string;
};

/**
 * Members: owners and admins invite by email with a role, change roles and remove; a
 * member sees the list and may leave. Controls a person may not use are not shown (the
 * API refuses them anyway).
 */
export function MembersPage({ project, session }: { project: Project; session: Session }) {
  const base = `/projects/${encodeURIComponent(project.id)}/members`;
  const list = useLoad(() => api<{ members: Member[] }>('GET', base).then((r) => r.members), [project.id]);
  const members = list.data;
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<'member' | 'admin'>('member');
  // Inviting and changing a role are one POST, so they share a busy and an error.
  const posting = useAction();
  const [done, setDone] = useState('');
  const manage = canWrite(project.role);
  const me = session.user.id;
  const removing = useConfirmRemoval(
    (m: Member) => api('DELETE', `${base}/${encodeURIComponent(m.user_id)}`),
    (m) => {
      if (m.user_id === me) return navigate('/projects');
      setDone(`${m.email} was removed.`);
      return list.reload();
    },
  );
  // Pending invitations: addresses without a confirmed account, invited by email.
  const invitations = useLoad(
    () => (manage ? api<{ invitations: Invitation[]; email_enabled: boolean }>('GET', `/projects/${encodeURIComponent(project.id)}/invitations`) : Promise.resolve(null)),
    [project.id],
  );
  const revoking = useConfirmRemoval(
    (i: Invitation) => api('DELETE', `/projects/${encodeURIComponent(project.id)}/invitations/${encodeURIComponent(i.id)}`),
    (i) => {
      setDone(`The invitation to ${i.email} was revoked; its link no longer works.`);
      return invitations.reload();
    },
  );
  const busy = posting.busy || removing.busy || revoking.busy;

  // Resending is inviting again: a new link replaces the old one, which stops working.
  const resend = (i: Invitation) => {
    setDone('');
    posting.run(async () => {
      await api('POST', base, { email: i.email, role: i.role });
      setDone(`A new invitation was sent to ${i.email}; the link in the earlier one no longer works.`);
      await invitations.reload();
    });
  };
  const emailOn = invitations.data?.email_enabled ?? false;

  const invite = (e: Event) => {
    e.preventDefault();
    setDone('');
    posting.run(async () => {
      const r = await api<Member & { invitation?: Invitation }>('POST', base, { email, role });
      if (r.invitation) {
        setDone(`Invitation sent to ${r.invitation.email}. They join as ${article(r.invitation.role)} ${r.invitation.role} when they accept it.`);
        setEmail('');
        await invitations.reload();
        return;
      }
      setDone(`${r.email} is now ${article(r.role)} ${r.role} of ${project.name}.`);
      setEmail('');
      await list.reload();
    });
  };

  // The API's POST sets the role of an existing member, too.
  const changeRole = (m: Member, to: string) => {
    setDone('');
    posting.run(async () => {
      const r = await api<Member & { invitation?: Invitation }>('POST', base, { email: m.email, role: to });
      // An older API answers a role change for an unconfirmed address with an
      // invitation and leaves the role; say what happened rather than what was asked.
      if (r.invitation) {
        setDone(`${m.email}'s role did not change: an invitation was sent instead.`);
        await invitations.reload();
        return;
      }
      setDone(`${m.email} is now ${article(r.role)} ${r.role}.`);
      await list.reload();
    });
  };

  return (
    <>
      <PageHeader title="Members" project={project.name} />
      <p class="lede">
        Owners and admins change the project; members see it. Your role: <span class="badge">{project.role}</span>
      </p>
      {manage && (
        <section class="panel" aria-labelledby="invite-h">
          <h2 id="invite-h">Invite someone</h2>
          <form class="inline-form" onSubmit={invite}>
            <Field label="Email" type="email" name="email" required value={email} placeholder="teammate@example.com"
              aria-describedby="invite-hint" onInput={(e) => setEmail(e.currentTarget.value)} />
            <RoleSelect label="Role" value={role} onChange={(v) => setRole(v as 'member' | 'admin')} />
            <button type="submit" class="btn btn-primary" disabled={busy || !email.trim()}>
              Invite
            </button>
          </form>
          <p id="invite-hint" class="hint">
            {emailOn
              ? 'Someone without an account (or who has not confirmed their address) gets an invitation by email.'
              : 'They need an account: ask them to sign up first (invitations by email need the operator to configure email).'}{' '}
            Admins change the project like the owner; members see it.
          </p>
        </section>
      )}
      <ErrorMessage error={posting.error} />
      {done && <Notice>{done}</Notice>}
      <LoadStatus load={list} what="members" />
      <RemovableTable caption={`Members of ${project.name}`} columns={['Email', 'Role', 'Since']} items={members}
        id={(m) => m.user_id} removal={removing} busy={busy}
        cells={(m) => (
          <>
            <td>
              {m.email}
              {m.user_id === me && <span class="badge badge-quiet">you</span>}
            </td>
            <td>
              {manage && m.role !== 'owner' ? (
                <RoleSelect label={`Role of ${m.email}`} hideLabel value={m.role} disabled={busy}
                  onChange={(v) => changeRole(m, v)} />
              ) : (
                <span class="badge">{m.role}</span>
              )}
            </td>
            <td>
              <When at={m.created_at} never="" />
            </td>
          </>
        )}
        action={(m) => {
          if (m.role === 'owner' || !(manage || m.user_id === me)) return null;
          return m.user_id === me ? { label: 'Leave this project', text: 'Leave' } : { label: `Remove ${m.email}`, text: 'Remove' };
        }}
        confirm={(m) =>
          m.user_id === me
            ? {
                title: `Leave “${project.name}”?`,
                confirmLabel: 'Leave project',
                body: 'You lose access to this project at once; an owner or admin can invite you again.',
              }
            : {
                title: `Remove ${m.email}?`,
                confirmLabel: 'Remove member',
                body: 'They lose access to this project at once, including its console reads.',
              }
        }
      />
      {manage && invitations.data && invitations.data.invitations.length > 0 && (
        <>
          <h2 id="pending-h" class="section-title">Pending invitations</h2>
          <RemovableTable caption={`Pending invitations to ${project.name}`} columns={['Email', 'Role', 'Invited by', 'Sent', 'Expires']}
            items={invitations.data.invitations} id={(i) => i.id} removal={revoking} busy={busy}
            cells={(i) => (
              <>
                <td>{i.email}</td>
                <td>
                  <span class="badge">{i.role}</span>
                </td>
                <td>{i.invited_by_email ?? '—'}</td>
                <td>
                  <When at={i.created_at} />
                </td>
                <td>
                  <When at={i.expires_at} />{' '}
                  <button type="button" class="btn btn-small" disabled={busy} aria-label={`Resend the invitation to ${i.email}`}
                    onClick={() => resend(i)}>
                    Resend
                  </button>
                </td>
              </>
            )}
            action={(i) => ({ label: `Revoke the invitation to ${i.email}`, text: 'Revoke' })}
            confirm={(i) => ({
              title: `Revoke the invitation to ${i.email}?`,
              confirmLabel: 'Revoke invitation',
              body: 'The link in their email stops working at once; you can invite them again.',
            })}
          />
        </>
      )}
    </>
  );
}

function article(role: string) {
  return role === 'admin' || role === 'owner' ? 'an' : 'a';
}

function RoleSelect(props: { label: string; hideLabel?: boolean; value: string; disabled?: boolean; onChange: (v: string) => void }) {
  const id = useId();
  return (
    <div class={props.hideLabel ? undefined : 'field field-narrow'}>
      <label for={id} class={props.hideLabel ? 'sr-only' : undefined}>
        {props.label}
      </label>
      <select id={id} value={props.value} disabled={props.disabled}
        onChange={(e) => props.onChange((e.currentTarget as HTMLSelectElement).value)}>
        <option value="member">member</option>
        <option value="admin">admin</option>
      </select>
    </div>
  );
}
