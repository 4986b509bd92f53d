package main

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/dnsresolver"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestExpWorkers(t *testing.T) {
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
	unique := func(int) *queryGen { return newUniqueGen() }
	names := make([]string, 100)
	for i := range names {
		names[i] = "name" + strconv.Itoa(i) + ".bench.test"
	}
	rep := func(w int) *queryGen { return newRepeatedGen(names, w) }
	warmNames(context.Background(), via, names)
	gen := unique
	if os.Getenv("REP") != "" {
		gen = rep
	}
	for _, ws := range strings.Fields(os.Getenv("WORKERS")) {
		w, _ := strconv.Atoi(ws)
		c0 := cpu()
		a, _ := closedLoop(context.Background(), stub.addr, w, time.Second, gen)
		c1 := cpu()
		b, _ := closedLoop(context.Background(), via, w, time.Second, gen)
		c2 := cpu()
		ca := (c1 - c0) / time.Duration(a.good)
		cb := (c2 - c1) / time.Duration(b.good)
		t.Logf("w=%d direct %s p50 %v cpu/q %v util %.2f | sluice %s p50 %v cpu/q %v util %.2f | ratio %.2f", w, fmtQPS(a.qps()), percentile(a.lat, 50), ca, float64(c1-c0)/1.25e9, fmtQPS(b.qps()), percentile(b.lat, 50), cb, float64(c2-c1)/1.25e9, b.qps()/a.qps())
	}
}
