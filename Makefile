# SPDX-License-Identifier: Apache-2.0
# sluice — build, test and benchmark targets. Tests that touch the kernel
# need root (CI runs as root); without it they skip with a message.

GO        ?= go
CLANG     ?= clang-19
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
PREFIX    ?= /usr/local
# Empty: each fuzz target runs a fixed number of executions (see fuzz).
FUZZTIME  ?=

.PHONY: all generate check-generate build test unit race lint fuzz bench demo install release clean

all: build

# Regenerate the committed BPF objects (needs clang-19, llvm-19, libbpf-dev):
# loader/sluice_bpfel.* (bpf/sluice.c, the datapath), loader/kdns_bpfel.*
# (bpf/kdns.c, the kernel DNS path's own object) and loader/kdnstest's fuzz
# object (bpf/kdns_test.c), and the in-kernel SNI experiment's object
# (bpf/sniprobe.c, sniprobe/); the go:generate lines are in loader/gen.go,
# loader/kdnstest/doc.go and sniprobe/gen.go.
generate:
	cd loader && $(GO) generate ./...
	cd sniprobe && $(GO) generate ./...

# Fail when a committed BPF object or its generated Go is not what the
# committed bpf/ source generates. Regenerates into the tree (so run it on a
# clean checkout, as CI does). The output is byte-identical wherever it is
# built: bpf2go maps the source directory out of the debug info and strips
# DWARF, and clang-19/libbpf-dev are pinned by Debian's release. Not part of
# `make test`: building and testing need no clang, only this check does.
check-generate: generate
	@git diff --exit-code --stat -- bpf/ loader/ sniprobe/ || { echo "check-generate: loader/*_bpfel.* differ from what bpf/ generates: run 'make generate' and commit the result"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- loader/ sniprobe/)" || { git status --short -- loader/ sniprobe/; echo "check-generate: make generate left untracked files in loader/ or sniprobe/"; exit 1; }

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/sluice ./cmd/sluice

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) build ./...
	GOOS=windows $(GO) build ./...
	GOOS=windows GOARCH=amd64 $(GO) vet -tags sluice_wfp ./userspace/wfp/
	GOOS=windows GOARCH=arm64 $(GO) build -tags sluice_wfp ./userspace/wfp/
	# deploy/ is a module of its own (the Kubernetes manifests' and Helm
	# chart's tests, with their Kubernetes dependencies): ./... above stops
	# at its go.mod.
	cd deploy && $(GO) vet ./...

# One package at a time: the kernel end-to-end packages time real network
# round trips, and on a 2-CPU runner running them side by side only adds
# noise (the whole of make test takes ~5 minutes on 2 shared vCPUs).
#
# Test recipes read stdin from /dev/null: on a terminal, nothing a test
# starts (sluice run hands its stdin to the confined command) can wait for
# input.
unit:
	$(GO) test -count=1 -p 1 -timeout 20m ./... </dev/null
	$(GO) test -count=1 -tags sluice_wfp ./userspace/wfp/ </dev/null
	cd deploy && $(GO) test -count=1 ./... </dev/null
	# The DNS end-to-end tests again, on each DNS path that is not the
	# default (auto): --dns-path kernel and resolver must keep passing.
	SLUICE_E2E_DNS_PATH=kernel $(GO) test -count=1 -p 1 -timeout 10m ./tests/dnse2e/ ./tests/daemone2e/ </dev/null
	SLUICE_E2E_DNS_PATH=resolver $(GO) test -count=1 -p 1 -timeout 10m ./tests/dnse2e/ ./tests/daemone2e/ </dev/null

# The race detector over the packages whose goroutines share state: the
# resolver's batched UDP loops, upstream readers and timeout sweep; the
# proxy's tunnels. Needs cgo (gcc).
race:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./dnsresolver/ ./proxy/ ./allowlist/ </dev/null

# Bounded fuzzing of the parsers that take hostile input: the allowlist
# file, DNS answers (filtering and the whole resolve path), the UDP fast
# path's query parser and answer filter (held to miekg/dns and FilterAnswer),
# and the kernel DNS path's BPF query and answer judges, run through
# BPF_PROG_TEST_RUN (root; held to miekg/dns and FilterAnswer too).
#
# Each target runs a count of executions (about 20 s each on a 2-CPU
# runner), not a duration: Go 1.26's fuzz coordinator can report a bare
# "context deadline exceeded" failure when a -fuzztime duration expires
# under CPU contention (go.dev/issue/75804, fixed in Go 1.27); a count has
# no deadline to race. FUZZTIME=60s (or =1000000x) overrides every target.
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(or $(FUZZTIME),200000x) ./allowlist/ </dev/null
	$(GO) test -run='^$$' -fuzz='^FuzzParseGuard$$' -fuzztime=$(or $(FUZZTIME),100000x) ./podpolicy/ </dev/null
	$(GO) test -run='^$$' -fuzz='^FuzzFilterAnswer$$' -fuzztime=$(or $(FUZZTIME),400000x) ./dnsresolver/ </dev/null
	$(GO) test -run='^$$' -fuzz='^FuzzResolve$$' -fuzztime=$(or $(FUZZTIME),300000x) ./dnsresolver/ </dev/null
	$(GO) test -run='^$$' -fuzz='^FuzzParseQuery$$' -fuzztime=$(or $(FUZZTIME),400000x) ./dnsresolver/ </dev/null
	$(GO) test -run='^$$' -fuzz='^FuzzAcceptWire$$' -fuzztime=$(or $(FUZZTIME),400000x) ./dnsresolver/ </dev/null
	$(GO) test -run='^$$' -fuzz='^FuzzKDNSQuery$$' -fuzztime=$(or $(FUZZTIME),100000x) ./loader/kdnstest/ </dev/null
	$(GO) test -run='^$$' -fuzz='^FuzzKDNSAnswer$$' -fuzztime=$(or $(FUZZTIME),150000x) ./loader/kdnstest/ </dev/null

# The whole suite: lint, unit and kernel end-to-end tests, the race
# detector, bounded fuzzing.
test: lint unit race fuzz

bench: build
	$(GO) run ./tests/bench -sluice bin/sluice

# A throwaway namespace world: a confined command reaches an allowed host
# and is refused another, with sluice's explanation. No real traffic.
demo: build
	./scripts/demo.sh bin/sluice

install: build
	install -D -m 0755 bin/sluice $(DESTDIR)$(PREFIX)/bin/sluice
	install -D -m 0755 ci/sluice-ci $(DESTDIR)$(PREFIX)/bin/sluice-ci
	install -D -m 0644 packaging/sluice.service $(DESTDIR)/etc/systemd/system/sluice.service
	test -e $(DESTDIR)/etc/sluice/sluice.json || install -D -m 0644 packaging/sluice.json $(DESTDIR)/etc/sluice/sluice.json
	# An example only: a live allowlist would open those hosts at once;
	# no file means loopback only.
	install -D -m 0644 packaging/network_allowlist.json $(DESTDIR)/etc/sluice/network_allowlist.json.example

# Static binaries for linux/amd64, linux/arm64, darwin/amd64, darwin/arm64
# and windows/amd64, .deb and .rpm for linux/amd64 and linux/arm64 (nfpm),
# and SHA256SUMS, in dist/. The same commit gives the same bytes.
release:
	./packaging/release.sh dist

clean:
	rm -rf bin dist
