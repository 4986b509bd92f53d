package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func rcvbufErrs() string {
	b, _ := os.ReadFile("/proc/net/snmp")
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "Udp:") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "Udp:") {
			return lines[i+1]
		}
	}
	return ""
}

func TestExpOpen(t *testing.T) {
	stub, err := startStub()
	if err != nil {
		t.Fatal(err)
	}
	defer stub.close()
	unique := func(int) *queryGen { return newUniqueGen() }
	l, err := closedLoop(context.Background(), stub.addr, 8, time.Second, unique)
	t.Logf("closed: %v %s p99 %v lost %d", err, fmtQPS(l.qps()), percentile(l.lat, 99), l.lost)
	for _, r := range strings.Fields(os.Getenv("RATES")) {
		rate, _ := strconv.ParseFloat(r, 64)
		senders, _ := strconv.Atoi(os.Getenv("SENDERS"))
		t.Logf("before %s", rcvbufErrs())
		l, err := openLoop(context.Background(), stub.addr, max(senders, 1), rate, 2*time.Second, unique)
		t.Logf("after  %s", rcvbufErrs())
		t.Logf("open %s: %v sent %s good %s p50 %v p99 %v lost %d", r, err, fmtQPS(l.sentQPS()), fmtQPS(l.qps()), percentile(l.lat, 50), percentile(l.lat, 99), l.lost)
	}
}
