# otelcol-svc. `make run` starts the embedded default; `make test` runs every test.
GO        ?= go
BIN       ?= bin
OCB       := $(BIN)/ocb
OCB_VER   := v0.162.0
DATA_DIR  ?= ./data
FUZZTIME  ?= 10s

.PHONY: build run test test-sdk generate check-generate bench fuzz clean

build:
	$(GO) build -o $(BIN)/otelcol-svc ./cmd/otelcol-svc
	$(GO) build -o $(BIN)/controlplane ./controlplane

# The embedded default: the collector (all data-plane roles, embedded NATS) and the
# control plane beside it (SQLite), state under DATA_DIR. Ctrl-C stops both.
run: build
	@mkdir -p $(DATA_DIR)
	@echo "otelcol-svc (embedded default): data in $(DATA_DIR)"
	@echo "  control plane API           http://localhost:8080"
	@echo "  ingest  OTLP/HTTP + events  http://localhost:4318"
	@echo "  OTLP/gRPC                   localhost:4317"
	@echo "  embedded NATS               nats://127.0.0.1:4223"
	@echo "  health                      http://127.0.0.1:13133"
	@echo "  collector metrics           http://localhost:8888/metrics"
	@SVC_DATA_DIR=$(DATA_DIR) $(BIN)/otelcol-svc --config configs/embedded.yaml & col=$$!; \
	trap 'kill $$col 2>/dev/null; wait $$col' EXIT INT TERM; \
	SVC_DATA_DIR=$(DATA_DIR) $(BIN)/controlplane

test:
	$(GO) test -count=1 ./...
	$(MAKE) --no-print-directory test-sdk

# The Python and JavaScript agent SDKs' own tests (their cross-language check against
# components/webhooksig runs with the Go tests, in ./sdk).
test-sdk:
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s sdk/python/tests -t sdk/python
	node --test sdk/typescript/test/*.test.js

# Regenerates cmd/otelcol-svc from builder-config.yaml with the pinned ocb.
generate: $(OCB)
	$(OCB) --config builder-config.yaml --skip-get-modules --skip-compilation

$(OCB):
	GOBIN=$(abspath $(BIN)) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VER)
	mv $(BIN)/builder $(OCB)

# Fails when the generated distribution does not match builder-config.yaml.
check-generate: generate
	@git diff --exit-code -- cmd/otelcol-svc/main.go cmd/otelcol-svc/components.go cmd/otelcol-svc/main_others.go cmd/otelcol-svc/main_windows.go \
		|| (echo "cmd/otelcol-svc is out of date with builder-config.yaml: run 'make generate' and commit" && exit 1)

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
