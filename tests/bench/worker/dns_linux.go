// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// dnsLoad is -op dns: queries from this process, so that the driver can put
// the load generator into a session (or not) and compare DNS paths.
type dnsLoad struct {
	mode  string
	names string
	conc  int
	rate  float64
	dur   time.Duration
}

func (d *dnsLoad) flags() {
	flag.StringVar(&d.mode, "mode", "closed", "-op dns: closed (-conc in flight) or open (-rate per second)")
	flag.StringVar(&d.names, "names", "unique", "-op dns: unique (a new name per query) or repeated (100 names)")
	flag.IntVar(&d.conc, "conc", 64, "-op dns: queries in flight, closed loop")
	flag.Float64Var(&d.rate, "rate", 5000, "-op dns: queries per second, open loop")
	flag.DurationVar(&d.dur, "dur", 2*time.Second, "-op dns: measured time, after a 250 ms warm-up")
}

// dnsReport is what -op dns prints.
type dnsReport struct {
	Sent  int     `json:"sent"`
	Good  int     `json:"good"`
	Lost  int     `json:"lost"`
	QPS   float64 `json:"qps"`
	P50ns int64   `json:"p50_ns"`
	P99ns int64   `json:"p99_ns"`
}

const dnsWarm = 250 * time.Millisecond

func (d *dnsLoad) run(target string) error {
	to, err := netip.ParseAddrPort(target)
	if err != nil {
		return fmt.Errorf("-op dns needs -addrs ADDR:PORT: %w", err)
	}
	if d.conc < 1 || d.conc > 1024 || d.rate <= 0 || d.dur <= 0 || (d.names != "unique" && d.names != "repeated") {
		return errors.New("-op dns: want 1 ≤ -conc ≤ 1024, -rate > 0, -dur > 0, -names unique|repeated")
	}
	var rep dnsReport
	if d.mode == "open" {
		rep, err = d.open(to)
	} else {
		rep, err = d.closed(to)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// query builds a query for a unique or a repeated name.
func (d *dnsLoad) query(id uint16, seq uint64) []byte {
	var label string
	if d.names == "unique" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		label = "u" + hex.EncodeToString(b[:])
	} else {
		label = fmt.Sprintf("r%d", seq%100)
	}
	q := []byte{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(q, id)
	for _, l := range []string{label, "bench", "test"} {
		q = append(q, byte(len(l)))
		q = append(q, l...)
	}
	return append(q, 0, 0, 1, 0, 1)
}

// ok reports whether b answers id with NOERROR.
func ok(b []byte, id uint16) bool {
	return len(b) >= 12 && binary.BigEndian.Uint16(b) == id && b[2]&0x80 != 0 && b[3]&0x0f == 0
}

func (d *dnsLoad) closed(to netip.AddrPort) (dnsReport, error) {
	start := time.Now()
	from, until := start.Add(dnsWarm), start.Add(dnsWarm+d.dur)
	var good, lost, sent atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, d.conc)
	for w := range d.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			buf := make([]byte, 1500)
			for seq := uint64(w); ; seq += uint64(d.conc) {
				now := time.Now()
				if now.After(until) {
					return
				}
				id := uint16(seq)
				if _, err := c.Write(d.query(id, seq)); err != nil {
					errs <- err
					return
				}
				counted := now.After(from)
				if counted {
					sent.Add(1)
				}
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				for {
					n, err := c.Read(buf)
					if err != nil {
						if counted {
							lost.Add(1)
						}
						break
					}
					if binary.BigEndian.Uint16(buf) != id {
						continue // a late answer to an earlier query
					}
					if counted && ok(buf[:n], id) {
						good.Add(1)
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return dnsReport{}, err
	default:
	}
	g := int(good.Load())
	return dnsReport{Sent: int(sent.Load()), Good: g, Lost: int(lost.Load()), QPS: float64(g) / d.dur.Seconds()}, nil
}

// open sends at d.rate from one pacing goroutine over 8 sockets and times
// every answer; queries unanswered within a second are lost.
func (d *dnsLoad) open(to netip.AddrPort) (dnsReport, error) {
	const socks = 8
	type sock struct {
		c    *net.UDPConn
		mu   sync.Mutex
		sent map[uint16]time.Time
		lat  []time.Duration
	}
	var ss []*sock
	for range socks {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
		if err != nil {
			return dnsReport{}, err
		}
		defer c.Close()
		ss = append(ss, &sock{c: c, sent: map[uint16]time.Time{}})
	}
	start := time.Now()
	from, until := start.Add(dnsWarm), start.Add(dnsWarm+d.dur)
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1500)
			for {
				_ = s.c.SetReadDeadline(until.Add(time.Second))
				n, err := s.c.Read(buf)
				if err != nil {
					return
				}
				now := time.Now()
				if n < 12 {
					continue
				}
				id := binary.BigEndian.Uint16(buf)
				s.mu.Lock()
				t0, found := s.sent[id]
				if found {
					delete(s.sent, id)
					if ok(buf[:n], id) && t0.After(from) {
						s.lat = append(s.lat, now.Sub(t0))
					}
				}
				s.mu.Unlock()
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / d.rate)
	sent := 0
	for i := uint64(0); ; i++ {
		next := start.Add(time.Duration(i) * interval)
		if next.After(until) {
			break
		}
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
		s := ss[i%socks]
		id := uint16(i / socks)
		s.mu.Lock()
		s.sent[id] = time.Now()
		s.mu.Unlock()
		if _, err := s.c.Write(d.query(id, i)); err != nil {
			return dnsReport{}, err
		}
		if next.After(from) {
			sent++
		}
	}
	wg.Wait()
	var lat []time.Duration
	for _, s := range ss {
		lat = append(lat, s.lat...)
	}
	slices.Sort(lat)
	pct := func(p float64) int64 {
		if len(lat) == 0 {
			return 0
		}
		return int64(lat[min(len(lat)-1, int(p*float64(len(lat))))])
	}
	return dnsReport{Sent: sent, Good: len(lat), Lost: max(sent-len(lat), 0), QPS: float64(len(lat)) / d.dur.Seconds(),
		P50ns: int64(pct(0.50)), P99ns: int64(pct(0.99))}, nil
}
