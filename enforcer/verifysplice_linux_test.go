// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (dialed, accepted *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); a.Close() })
	return d.(*net.TCPConn), a.(*net.TCPConn)
}

// spliceEnforcer opens an enforcer of its own with the splice ready.
func spliceEnforcer(t *testing.T) *Enforcer {
	e := testEnforcer(t, "sluice-splice")
	if err := e.dp.PrepareSplice(); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestKernelSpliceKeepsEveryByte: a connection carried by the in-kernel
// splice delivers every byte in order both ways (checksums of 64 MiB each
// way), including bytes queued before the splice began and the first flight
// the verifier wrote itself, passes a half-close on only after the data
// before it, keeps the other direction open after it, and the bytes went
// through the kernel's redirect, not a copy in this process.
func TestKernelSpliceKeepsEveryByte(t *testing.T) {
	e := spliceEnforcer(t)
	client, c := tcpPair(t)  // the program and the verifier's accepted end
	up, server := tcpPair(t) // the verifier's upstream and the server
	const size = 64 << 20
	up1 := make([]byte, size)
	down := make([]byte, size)
	_, _ = rand.Read(up1)
	_, _ = rand.Read(down)
	// The verifier read and wrote the first flight itself; the client sent
	// more before the splice began.
	const first, queued = 517, 3000
	if _, err := up.Write(up1[:first]); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write(up1[first : first+queued]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	var cookie uint64
	if err := withFD(c, func(fd int) (err error) {
		cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() { done <- kernelSplice(e.dp, c, up) }()

	serverGot := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(server) // until the client's half-close
		serverGot <- b
	}()
	clientGot := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		clientGot <- b
	}()
	if _, err := client.Write(up1[first+queued:]); err != nil {
		t.Fatal(err)
	}
	// Wait until the server has everything, then read the redirect's
	// count before the half-close.
	deadline := time.Now().Add(30 * time.Second)
	var redirected uint64
	var err error
	for time.Now().Before(deadline) {
		if redirected, err = e.dp.SplicedBytes(cookie); err == nil && redirected >= size-first {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if redirected != size-first {
		t.Fatalf("the kernel redirected %d bytes from the client, want %d", redirected, size-first)
	}
	if err := client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	select {
	case got = <-serverGot:
	case <-time.After(30 * time.Second):
		t.Fatal("the server saw no end of stream after the client's half-close")
	}
	if sha256.Sum256(got) != sha256.Sum256(up1) {
		t.Fatalf("the server got %d bytes, not the %d the client sent (or in another order)", len(got), len(up1))
	}
	// The other direction is still open after the half-close.
	if _, err := server.Write(down); err != nil {
		t.Fatal(err)
	}
	if err := server.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case got = <-clientGot:
	case <-time.After(30 * time.Second):
		t.Fatal("the client saw no end of stream after the server's")
	}
	if !bytes.Equal(got, down) {
		t.Fatalf("the client got %d bytes, not the %d the server sent (or in another order)", len(got), len(down))
	}
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("the sockets could not be spliced in the kernel")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the splice did not end after both directions did")
	}
	if _, err := e.dp.SplicedBytes(cookie); err == nil {
		t.Error("the splice left its entry in the map")
	}
}

// TestKernelSpliceCarriesAnAnswerQueuedBefore: the server answers the
// first flight before the sockets are in the map (a TLS server's
// ServerHello): the answer reaches the client at once, and so does every
// exchange after it.
func TestKernelSpliceCarriesAnAnswerQueuedBefore(t *testing.T) {
	e := spliceEnforcer(t)
	client, c := tcpPair(t)
	up, server := tcpPair(t)
	if _, err := up.Write([]byte("hello?")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	if n, err := server.Read(b); err != nil || string(b[:n]) != "hello?" {
		t.Fatalf("server read %q %v", b[:n], err)
	}
	if _, err := server.Write([]byte("hello!")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // queued in up before the splice
	done := make(chan bool, 1)
	go func() { done <- kernelSplice(e.dp, c, up) }()
	_ = client.SetDeadline(time.Now().Add(5 * time.Second))
	_ = server.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := io.ReadFull(client, b[:6]); err != nil || string(b[:n]) != "hello!" {
		t.Fatalf("client read %q %v", b[:n], err)
	}
	for i := range 50 {
		msg := []byte{byte(i), 'p', 'i', 'n', 'g'}
		if _, err := client.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(server, b[:5]); err != nil || !bytes.Equal(b[:5], msg) {
			t.Fatalf("exchange %d: server read %q %v", i, b[:5], err)
		}
		if _, err := server.Write(msg[:1]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, b[:1]); err != nil || b[0] != byte(i) {
			t.Fatalf("exchange %d: client read %q %v", i, b[:1], err)
		}
	}
	client.Close()
	server.Close()
	if ok := <-done; !ok {
		t.Fatal("the sockets could not be spliced in the kernel")
	}
}

// TestKernelSpliceEndsWhenTheClientIsGone: the client closes while the
// server still sends (a TLS server's session tickets after the
// handshake): the bytes the kernel could not deliver do not keep the
// splice waiting for them.
func TestKernelSpliceEndsWhenTheClientIsGone(t *testing.T) {
	e := spliceEnforcer(t)
	client, c := tcpPair(t)
	up, server := tcpPair(t)
	done := make(chan bool, 1)
	go func() { done <- kernelSplice(e.dp, c, up) }()
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(server, b); err != nil {
		t.Fatal(err)
	}
	client.Close()
	time.Sleep(20 * time.Millisecond)
	for range 4 {
		_, _ = server.Write(make([]byte, 300))
		time.Sleep(5 * time.Millisecond)
	}
	server.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the splice still waits after both ends closed")
	}
}
