package endpoint

import (
	"net/http"
	"testing"
)

// A client is its peer, unless the peer is a trusted proxy: then the
// right-most address of X-Forwarded-For that is not a trusted proxy's; an
// IPv6 client is its /64.
func TestClientAddresses(t *testing.T) {
	proxies, err := ParseTrustedProxies([]string{"10.0.0.0/8", "192.0.2.7", "2001:db8:ffff::/48", "::ffff:198.51.100.0/120"})
	if err != nil {
		t.Fatal(err)
	}
	trusting, open := clientAddresses{proxies: proxies}, clientAddresses{}
	for _, c := range []struct {
		peer      string
		forwarded []string
		want      string // with the proxies trusted
		untrusted string // without
	}{
		{"203.0.113.9:4711", []string{"198.51.100.1"}, "203.0.113.9", "203.0.113.9"}, // a peer that is no proxy speaks for itself
		{"10.1.2.3:4711", nil, "10.1.2.3", "10.1.2.3"},
		{"10.1.2.3:4711", []string{"203.0.113.9"}, "203.0.113.9", "10.1.2.3"},
		{"10.1.2.3:4711", []string{"198.51.1.1, 203.0.113.9"}, "203.0.113.9", "10.1.2.3"},            // what the client wrote counts for nothing
		{"10.1.2.3:4711", []string{"203.0.113.9, 192.0.2.7"}, "203.0.113.9", "10.1.2.3"},             // through two proxies
		{"10.1.2.3:4711", []string{"203.0.113.9", "10.9.9.9, 192.0.2.7"}, "203.0.113.9", "10.1.2.3"}, // in two headers
		{"10.1.2.3:4711", []string{"10.9.9.9, 192.0.2.7"}, "10.9.9.9", "10.1.2.3"},                   // every hop a proxy: the first
		{"10.1.2.3:4711", []string{"203.0.113.9, unknown"}, "10.1.2.3", "10.1.2.3"},                  // what a proxy wrote is no address
		{"10.1.2.3:4711", []string{"203.0.113.9:5000"}, "203.0.113.9", "10.1.2.3"},
		{"10.1.2.3:4711", []string{"[2001:db8:1:2:3:4:5:6]:80"}, "2001:db8:1:2::/64", "10.1.2.3"},
		{"10.1.2.3:4711", []string{"::ffff:203.0.113.9"}, "203.0.113.9", "10.1.2.3"},
		{"[2001:db8:1:2::9]:4711", nil, "2001:db8:1:2::/64", "2001:db8:1:2::/64"},
		{"[2001:db8:ffff:1::9]:4711", []string{"2001:db8:5:6::1"}, "2001:db8:5:6::/64", "2001:db8:ffff:1::/64"},
		{"[::ffff:198.51.100.7]:4711", []string{"203.0.113.9"}, "203.0.113.9", "198.51.100.7"},
		{"@", nil, "@", "@"},
	} {
		r := &http.Request{RemoteAddr: c.peer, Header: http.Header{"X-Forwarded-For": c.forwarded}}
		if got := trusting.of(r); got != c.want {
			t.Errorf("%s, X-Forwarded-For %q, proxies trusted: %s, want %s", c.peer, c.forwarded, got, c.want)
		}
		if got := open.of(r); got != c.untrusted {
			t.Errorf("%s, X-Forwarded-For %q, no proxies: %s, want %s", c.peer, c.forwarded, got, c.untrusted)
		}
	}
	if _, err := ParseTrustedProxies([]string{"10.0.0.0/33"}); err == nil {
		t.Error("10.0.0.0/33 was taken for a CIDR")
	}
	if _, err := ParseTrustedProxies([]string{"proxy.example"}); err == nil {
		t.Error("a name was taken for an address")
	}
}
