package main

import (
	"context"
	"net/netip"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/dnsresolver"
)

func TestExpProf(t *testing.T) {
	stub, err := startStub()
	if err != nil {
		t.Fatal(err)
	}
	defer stub.close()
	policy, _ := allowlist.FromStrings([]string{"*." + dnsZone})
	cs, _ := strconv.Atoi(os.Getenv("CACHE"))
	res, err := dnsresolver.New(dnsresolver.Config{Policy: policy, Upstreams: []string{stub.addr.String()}, Learner: &countingLearner{}, CacheSize: cs})
	if err != nil {
		t.Fatal(err)
	}
	res.ListenLoopback()
	defer res.Close()
	p4, _ := res.Ports()
	via := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), p4)
	gen := func(int) *queryGen { return newUniqueGen() }
	if os.Getenv("REP") != "" {
		names := make([]string, 100)
		for i := range names {
			names[i] = "name" + strconv.Itoa(i) + ".bench.test"
		}
		warmNames(context.Background(), via, names)
		gen = func(w int) *queryGen { return newRepeatedGen(names, w) }
	}
	target := via
	if os.Getenv("DIRECT") != "" {
		target = stub.addr
	}
	fh, _ := os.Create(os.Getenv("PROF"))
	pprof.StartCPUProfile(fh)
	c0 := cpu()
	l, _ := closedLoop(context.Background(), target, 16, 3*time.Second, gen)
	c1 := cpu()
	pprof.StopCPUProfile()
	t.Logf("%s cpu/q %v", fmtQPS(l.qps()), (c1-c0)/time.Duration(l.good))
}
