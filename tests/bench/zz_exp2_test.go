package main

import (
	"context"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/dnsresolver"
)

func TestExpSluice(t *testing.T) {
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
	workers, _ := strconv.Atoi(os.Getenv("WORKERS"))
	if f := os.Getenv("PROF"); f != "" {
		fh, _ := os.Create(f)
		pprof.StartCPUProfile(fh)
		defer pprof.StopCPUProfile()
	}
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(10000)
	defer func() {
		f, _ := os.Create("/tmp/mutex.prof")
		pprof.Lookup("mutex").WriteTo(f, 0)
		f.Close()
		f, _ = os.Create("/tmp/block.prof")
		pprof.Lookup("block").WriteTo(f, 0)
		f.Close()
	}()
	for i := range 6 {
		l, err := closedLoop(context.Background(), via, max(workers, 1), 500*time.Millisecond, unique)
		t.Logf("%d: %v %s p50 %v p99 %v lost %d fwd %d", i, err, fmtQPS(l.qps()), percentile(l.lat, 50), percentile(l.lat, 99), l.lost, res.Stats().Forwarded.Load())
	}
}
