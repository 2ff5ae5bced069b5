package nemesis

import (
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echo listens on a free loopback port and echoes every connection.
func echo(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return l.Addr().String()
}

// roundTrip writes a byte and reads it back, or fails past within.
func roundTrip(c net.Conn, within time.Duration) (time.Duration, error) {
	began := time.Now()
	c.SetDeadline(began.Add(within))
	if _, err := c.Write([]byte{1}); err != nil {
		return 0, err
	}
	_, err := io.ReadFull(c, make([]byte, 1))
	return time.Since(began), err
}

// The proxy tells this process by its pid, cuts its link to the node and
// heals it, data held meanwhile arriving after the heal, and slows it.
func TestNetworkCutsAndSlowsALink(t *testing.T) {
	n := NewNetwork()
	t.Cleanup(func() { n.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if err := n.Proxy("n1", addr, echo(t)); err != nil {
		t.Fatal(err)
	}
	n.SetOwner(os.Getpid(), "g1")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatalf("a healthy link: %v", err)
	}

	n.Cut("n1", "g2") // another process's link: this one still passes
	if _, err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatalf("another link cut: %v", err)
	}
	n.Cut("n1", "g1")
	if _, err := roundTrip(c, 500*time.Millisecond); err == nil {
		t.Fatal("a byte passed the cut link")
	}
	fresh, err := net.Dial("tcp", addr) // accepted by the proxy, then held
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := roundTrip(fresh, 500*time.Millisecond); err == nil {
		t.Fatal("a byte passed a new connection on the cut link")
	}
	n.Heal()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil { // the byte held by the cut
		t.Fatalf("after the heal: %v", err)
	}
	fresh.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(fresh, make([]byte, 1)); err != nil {
		t.Fatalf("the new connection after the heal: %v", err)
	}

	n.SetSlow("g1", Slow{Latency: 100 * time.Millisecond})
	took, err := roundTrip(c, 5*time.Second)
	if err != nil || took < 200*time.Millisecond {
		t.Fatalf("a round trip on a link 100 ms slower each way took %v (%v)", took, err)
	}
	n.Heal()
	if took, err := roundTrip(c, 5*time.Second); err != nil || took > 100*time.Millisecond {
		t.Fatalf("a round trip after the heal took %v (%v)", took, err)
	}
}
