# otelcol-svc. `make run` starts the embedded default; `make test` runs every test.
GO        ?= go
BIN       ?= bin
OCB       := $(BIN)/ocb
OCB_VER   := v0.162.0
# mdatagen's version is pinned in internal/tools/go.mod (a module of its own, so its
# dependencies stay out of ours, as in collector-contrib): v0.162.0 is not on the module
# proxy, and v0.161.0 needs a module version that is not either, so it is v0.159.0.
MDATAGEN  := $(BIN)/mdatagen
# telemetrygen (the contrib load generator, a real OTLP client no one here wrote) is pinned in
# internal/tools/telemetrygen/go.mod, a module apart from mdatagen's: v0.161.0, the newest on
# the module proxy, needs pdata v1.67.0 where mdatagen v0.159.0 has v1.65.0.
TELEMETRYGEN := $(BIN)/telemetrygen
# helm, for the chart in deploy/helm (its tests in deploy/helmtest render it), built from
# the module proxy as helm's own Makefile builds it: the ldflags set its version and the
# Kubernetes version it renders for when no cluster is asked (client-go v0.37 = 1.37;
# without them 1.20, which the chart's kubeVersion refuses).
HELM      := $(BIN)/helm
HELM_VER  := v3.22.0
HELM_K8S_MINOR := 37
HELM_LDFLAGS := -w -s -X helm.sh/helm/v3/internal/version.version=$(HELM_VER) \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR) \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR)
# Alertmanager, the real sender test/e2e/alertmanager_e2e_test.go runs against an alertmanager
# push source: v0.27.0, since later versions do not build from the module proxy (their UI
# assets are not in the module). The ldflags set the version as its release builds do.
ALERTMANAGER     := $(BIN)/alertmanager
ALERTMANAGER_VER := v0.27.0
# Mailpit, the real SMTP server the control plane's email tests send to and read back
# through its HTTP API (test/testenv/mailpit.go).
MAILPIT     := $(BIN)/mailpit
MAILPIT_VER := v1.33.1
# The real OpenID Connect provider the control plane's single sign-on tests log in through
# (test/testenv/oidcprovider.go): the example server of zitadel/oidc, renamed on the way
# into bin/ since go install names it "server". A stamp file records the version built.
OIDC_PROVIDER     := $(BIN)/zitadel-oidc-example
OIDC_PROVIDER_VER := v3.52.0
# The components mdatagen generates for: each directory with a metadata.yaml.
COMPONENTS := $(patsubst %/metadata.yaml,%,$(wildcard extension/*/metadata.yaml receiver/*/metadata.yaml processor/*/metadata.yaml exporter/*/metadata.yaml))
# What ocb and mdatagen write, as pathspecs for git.
GENERATED := cmd/otelcol-svc/main.go cmd/otelcol-svc/components.go cmd/otelcol-svc/main_others.go cmd/otelcol-svc/main_windows.go \
	$(foreach c,$(COMPONENTS),$(c)/generated_component_test.go $(c)/generated_package_test.go $(c)/documentation.md $(c)/internal/metadata $(c)/internal/metadatatest)
# make run keeps its state where SVC_DATA_DIR says, as the collector and the control plane
# do when started by hand (DATA_DIR, the older name, still wins when given).
DATA_DIR  ?= $(or $(SVC_DATA_DIR),./data)
FUZZTIME  ?= 10s

.PHONY: build run test test-cluster test-sdk web inspector signers generate check-generate bench fuzz clean images images-nats helm alertmanager mailpit oidc-provider

# The dashboard's assets are built first when npm is there; without it the control plane
# embeds a page that says how to build them (go build works on a fresh clone either way).
# DASHBOARD=no builds the control plane with whatever controlplane/web/dist holds (the
# make run test, which is not about the dashboard, does so to stay within its time).
DASHBOARD ?= auto
build:
	@if [ "$(DASHBOARD)" != no ] && command -v npm >/dev/null; then $(MAKE) --no-print-directory web; \
	else echo "npm not found: building the control plane without the dashboard (its / says how to build it)"; fi
	$(GO) build -o $(BIN)/otelcol-svc ./cmd/otelcol-svc
	$(GO) build -o $(BIN)/controlplane ./controlplane

# make run's addresses: the settings, and defaults, of configs/embedded.yaml and the
# control plane, so that its checks and its "ready" line follow them when they are moved.
RUN_HEALTH   = $(or $(SVC_HEALTH_LISTEN),127.0.0.1:13133)
RUN_CP       = $(or $(SVC_CONTROLPLANE_LISTEN),0.0.0.0:8080)
RUN_RECEIVER = $(or $(SVC_RECEIVER_LISTEN),0.0.0.0:4318)
RUN_GRPC     = $(or $(SVC_OTLP_GRPC_LISTEN),0.0.0.0:4317)
RUN_NATS     = $(or $(SVC_EMBEDDED_NATS_LISTEN),127.0.0.1:4223)
RUN_METRICS  = $(or $(SVC_METRICS_HOST),localhost):$(or $(SVC_METRICS_PORT),8888)
# dial: the address to connect to for a listen address (a wildcard host is not one);
# shown: the same as a person opens it (wildcards as localhost, as the README has it).
dial  = $(patsubst 0.0.0.0:%,127.0.0.1:%,$(patsubst :%,127.0.0.1:%,$(patsubst [::]:%,[::1]:%,$(1))))
shown = $(patsubst 0.0.0.0:%,localhost:%,$(patsubst :%,localhost:%,$(patsubst [::]:%,localhost:%,$(1))))
# The dashboard's origins for the receiver's CORS, from where the control plane listens: on
# a wildcard or loopback host, each name a browser on this machine may open it by (as the
# configs' default for 8080), else that address.
comma := ,
RUN_CP_PORT = $(lastword $(subst :, ,$(RUN_CP)))
RUN_ORIGINS = $(if $(filter 0.0.0.0:% :% [::]:% 127.0.0.1:% localhost:% [::1]:%,$(RUN_CP)),$(foreach h,localhost 127.0.0.1 [::1],http://$(h):$(RUN_CP_PORT)),http://$(RUN_CP))

# NATS_URL turns the embedded NATS off whatever SVC_EMBEDDED_NATS_LISTEN says (the
# collector's config cannot tell that setting from its default), so both at once is a
# mistake: refused here, before a build, rather than one of them silently ignored.
ifneq ($(filter run,$(MAKECMDGOALS)),)
ifneq ($(NATS_URL),)
ifneq ($(SVC_EMBEDDED_NATS_LISTEN),)
$(error make run: NATS_URL and SVC_EMBEDDED_NATS_LISTEN are both set, but NATS_URL turns the embedded NATS off. Unset one: NATS_URL to run the embedded NATS, SVC_EMBEDDED_NATS_LISTEN to use the external one)
endif
endif
endif

# The embedded default: the collector (all data-plane roles, embedded NATS unless NATS_URL
# is set) and the control plane beside it (SQLite), state under DATA_DIR. Ctrl-C stops both.
# Prints one "ready" line once the collector's health check and the control plane's
# /readyz both answer 200 (NATS up, configuration mirror published). Something already
# answering at either address would make that line a lie, so the run stops first. The
# control plane is pointed at the collector's NATS and receiver, and the collector at the
# dashboard's origin (console reads) and address (links in chat messages and failure
# notices) wherever they listen, unless those are set.
run: build
	@busy() { curl -gs -o /dev/null --max-time 3 "http://$$1/"; case $$? in 6|7) return 1;; esac; }; \
	if busy $(call dial,$(RUN_HEALTH)); then \
		echo "make run: something already answers at $(call dial,$(RUN_HEALTH)), the collector's health check address: stop it, or set SVC_HEALTH_LISTEN to a free address"; exit 1; fi; \
	if busy $(call dial,$(RUN_CP)); then \
		echo "make run: something already answers at $(call dial,$(RUN_CP)), the control plane's address: stop it, or set SVC_CONTROLPLANE_LISTEN to a free address"; exit 1; fi
	@mkdir -p $(DATA_DIR)
	@echo "otelcol-svc (embedded default): starting, data in $(DATA_DIR)"
	@SVC_DATA_DIR=$(DATA_DIR) SVC_DASHBOARD_ORIGIN="$(or $(SVC_DASHBOARD_ORIGIN),$(subst $() ,$(comma),$(strip $(RUN_ORIGINS))))" \
		SVC_PUBLIC_URL="$(or $(SVC_PUBLIC_URL),http://$(call shown,$(RUN_CP)))" \
		$(BIN)/otelcol-svc --config configs/embedded.yaml & col=$$!; \
	SVC_DATA_DIR=$(DATA_DIR) NATS_URL="$(or $(NATS_URL),nats://$(call dial,$(RUN_NATS)))" \
		SVC_PUBLIC_RECEIVER_URL="$(or $(SVC_PUBLIC_RECEIVER_URL),http://$(call shown,$(RUN_RECEIVER)))" \
		$(BIN)/controlplane & cp=$$!; \
	trap 'kill $$col $$cp 2>/dev/null; wait $$col $$cp' EXIT; \
	trap 'exit 130' INT TERM; \
	if [ -n "$$NATS_URL" ]; then nats="NATS (external) $$(printf %s "$$NATS_URL" | sed 's#//[^@/,]*@#//redacted@#g')"; \
	else nats="NATS nats://$(call dial,$(RUN_NATS))"; fi; \
	ready=; for i in $$(seq 1 600); do \
		if curl -gfs --max-time 3 -o /dev/null http://$(call dial,$(RUN_HEALTH))/ && curl -gfs --max-time 3 -o /dev/null http://$(call dial,$(RUN_CP))/readyz; then \
			echo "ready: control plane API http://$(call shown,$(RUN_CP)) | ingest (OTLP/HTTP, events) http://$(call shown,$(RUN_RECEIVER)) | OTLP/gRPC $(call shown,$(RUN_GRPC)) | $$nats | health http://$(call dial,$(RUN_HEALTH)) | metrics http://$(call shown,$(RUN_METRICS))/metrics"; \
			ready=1; break; \
		fi; \
		kill -0 $$col 2>/dev/null && kill -0 $$cp 2>/dev/null || { echo "otelcol-svc: a process exited during start (see above)"; exit 1; }; \
		sleep 0.1; \
	done; \
	[ -n "$$ready" ] || echo "otelcol-svc: not ready after a minute (see the logs above); still running"; \
	wait $$col $$cp

# The OCI images (deploy/docker/build.sh, FROM scratch, static binaries, user 10001):
# otelcol-svc (the collector; the embedded default unless given another config) and
# otelcol-svc-controlplane (with the dashboard, built first when npm is there), each
# tagged `git describe --tags --always --dirty` and dev. images-nats builds nats-server
# at go.mod's version for machines that cannot pull the official image.
# The dashboard is rebuilt only from npm packages already installed and no older than
# the lockfile: building images never reaches the npm registry (`make web` installs).
images:
	@w=controlplane/web; \
	if [ "$(DASHBOARD)" != no ] && command -v npm >/dev/null && [ -f $$w/node_modules/.package-lock.json ] \
		&& [ -z "$$(find $$w/package-lock.json $$w/package.json -newer $$w/node_modules/.package-lock.json)" ]; then \
		(cd $$w && npm run build); \
	else echo "images: the dashboard is not rebuilt (DASHBOARD=no, no npm, or its packages are not installed or older than package-lock.json: make web installs them); the control plane image embeds what $$w/dist holds now"; fi
	GO=$(GO) deploy/docker/build.sh collector controlplane

images-nats:
	GO=$(GO) deploy/docker/build.sh nats

# The dashboard's browser tests (controlplane/dashboard_e2e_test.go) need the built
# assets and the npm packages, hence web first; they skip without Node or Chromium,
# except under CI=true. The MCP Inspector check (controlplane/mcp_inspector_test.go)
# needs the pinned Inspector CLI, hence inspector.
# The images ./test/containers runs are built here, before go test, so that their cold
# build (minutes: -trimpath shares nothing with the test build cache) counts against no
# test timeout; the tests build an image only when the one tagged `git describe` is
# missing. The web step has just built the dashboard, hence DASHBOARD=no.
test: alertmanager mailpit oidc-provider
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory web inspector signers; fi
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory images images-nats DASHBOARD=no; \
	else echo "docker is not reachable: ./test/containers skips (fails under CI=true)"; fi
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) --no-print-directory helm && cd deploy/helmtest && $(GO) test -count=1 ./...
	$(MAKE) --no-print-directory test-sdk

# Scale-out under crashes: a 3-node NATS cluster (nats-server processes built from go.mod),
# two processes of each role, the control plane on PostgreSQL, Redis; a NATS node and one
# process of each role are killed under load. Needs Redis and PostgreSQL, as `make test`.
test-cluster:
	$(GO) test -count=1 -tags cluster -run TestCluster -v -timeout 10m ./test/e2e/ ./internal/mirror/

# The Python and JavaScript agent SDKs' own tests (their cross-language check against
# internal/webhooksig runs with the Go tests, in ./sdk).
test-sdk:
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s sdk/python/tests -t sdk/python
	node --test sdk/typescript/test/*.test.js

# The dashboard (controlplane/web): builds dist/, which the control plane embeds, after
# installing the locked npm packages when the lockfile changed since the last install.
web: controlplane/web/node_modules/.package-lock.json
	cd controlplane/web && npm run build

controlplane/web/node_modules/.package-lock.json: controlplane/web/package-lock.json controlplane/web/package.json
	cd controlplane/web && npm ci --no-audit --no-fund

# The senders' own signing libraries, pinned; internal/sourceverify's tests sign with them.
signers: internal/sourceverify/testdata/signers/node_modules/.package-lock.json

internal/sourceverify/testdata/signers/node_modules/.package-lock.json: internal/sourceverify/testdata/signers/package-lock.json internal/sourceverify/testdata/signers/package.json
	cd internal/sourceverify/testdata/signers && npm ci --no-audit --no-fund --ignore-scripts

# The MCP Inspector CLI, pinned in controlplane/testdata/inspector, which
# controlplane/mcp_inspector_test.go runs against a real control plane (a client no one
# here wrote). Installed again only when the lockfile changed since the last install.
inspector: controlplane/testdata/inspector/node_modules/.package-lock.json

controlplane/testdata/inspector/node_modules/.package-lock.json: controlplane/testdata/inspector/package-lock.json controlplane/testdata/inspector/package.json
	cd controlplane/testdata/inspector && npm ci --no-audit --no-fund --ignore-scripts

# Regenerates cmd/otelcol-svc from builder-config.yaml with the pinned ocb, and each
# component's internal/metadata, generated tests and documentation.md from its
# metadata.yaml with the pinned mdatagen (ocb's output is gofmt'ed, as every Go file in the
# tree is). The old generated files go first, so a file
# mdatagen no longer writes does not linger.
generate: $(OCB) $(MDATAGEN)
	$(OCB) --config builder-config.yaml --skip-get-modules --skip-compilation
	gofmt -w cmd/otelcol-svc
	@for c in $(COMPONENTS); do \
		echo "mdatagen $$c"; \
		rm -rf $$c/internal/metadata $$c/internal/metadatatest $$c/generated_component_test.go $$c/generated_package_test.go $$c/documentation.md; \
		(cd $$c && $(abspath $(MDATAGEN)) metadata.yaml) || exit 1; \
	done

$(OCB):
	GOBIN=$(abspath $(BIN)) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VER)
	mv $(BIN)/builder $(OCB)

# Built again when bin/helm is another version (helm version reads the ldflags' one).
helm:
	@if [ "$$($(HELM) version --template '{{.Version}}' 2>/dev/null)" != "$(HELM_VER)" ]; then \
		echo "building helm $(HELM_VER) into $(BIN)/ (a minute or two)"; \
		GOBIN=$(abspath $(BIN)) $(GO) install -trimpath -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$(HELM_VER); \
	fi

# Built again when bin/alertmanager is another version.
alertmanager:
	@if ! $(ALERTMANAGER) --version 2>/dev/null | grep -q 'version $(ALERTMANAGER_VER:v%=%) '; then \
		echo "building alertmanager $(ALERTMANAGER_VER) into $(BIN)/ (a minute or two)"; \
		GOBIN=$(abspath $(BIN)) $(GO) install -trimpath -ldflags '-X github.com/prometheus/common/version.Version=$(ALERTMANAGER_VER:v%=%)' github.com/prometheus/alertmanager/cmd/alertmanager@$(ALERTMANAGER_VER); \
	fi

mailpit:
	@if ! $(MAILPIT) version --no-release-check 2>/dev/null | grep -q '$(MAILPIT_VER)'; then \
		echo "building mailpit $(MAILPIT_VER) into $(BIN)/ (a minute or two)"; \
		GOBIN=$(abspath $(BIN)) $(GO) install -trimpath -ldflags '-X github.com/axllent/mailpit/config.Version=$(MAILPIT_VER)' github.com/axllent/mailpit@$(MAILPIT_VER); \
	fi

oidc-provider:
	@if [ "$$(cat $(OIDC_PROVIDER).version 2>/dev/null)" != "$(OIDC_PROVIDER_VER)" ] || [ ! -x $(OIDC_PROVIDER) ]; then \
		echo "building the zitadel/oidc example provider $(OIDC_PROVIDER_VER) into $(BIN)/"; \
		tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install -trimpath github.com/zitadel/oidc/v3/example/server@$(OIDC_PROVIDER_VER) && \
		mv $$tmp/server $(OIDC_PROVIDER) && rmdir $$tmp && echo $(OIDC_PROVIDER_VER) > $(OIDC_PROVIDER).version; \
	fi

$(MDATAGEN): internal/tools/go.mod internal/tools/go.sum
	cd internal/tools && GOBIN=$(abspath $(BIN)) $(GO) install go.opentelemetry.io/collector/cmd/mdatagen

# test/e2e/telemetrygen_e2e_test.go builds the same binary itself, so it does not need make.
$(TELEMETRYGEN): internal/tools/telemetrygen/go.mod internal/tools/telemetrygen/go.sum
	cd internal/tools/telemetrygen && GOBIN=$(abspath $(BIN)) $(GO) install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen

# Fails when a generated file (ocb's distribution, mdatagen's files) does not match what
# builder-config.yaml and the metadata.yaml files produce: changed, deleted or new.
check-generate: generate
	@git diff --exit-code -- $(GENERATED) \
		|| (echo "generated files are out of date: run 'make generate' and commit" && exit 1)
	@untracked=$$(git status --porcelain --untracked-files=all -- $(GENERATED)); \
	if [ -n "$$untracked" ]; then echo "$$untracked"; echo "generated files are not committed: run 'make generate' and commit them"; exit 1; fi

bench:
	$(GO) run ./bench/ingest

# Runs every fuzz target for FUZZTIME each.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

clean:
	rm -rf $(BIN)
