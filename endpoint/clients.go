package endpoint

import (
	"net/http"
	"net/netip"
	"strings"
)

// A client that has not authenticated is known by its address alone: the
// WebSockets it keeps before their connection_init are counted by it, and
// without credentials (development) its caller is named by it. Behind a
// proxy or a load balancer every request comes from the proxy's address;
// a proxy listed in --trusted-proxies says whom it forwarded for by
// appending the address it received the request from to X-Forwarded-For.
// The client is the right-most address there that is not a trusted
// proxy's: whatever stands left of it, the client wrote itself. Without
// trusted proxies, or from a peer that is not one, the header is the
// client's own word and counts for nothing. An IPv6 client is its /64,
// the least a site is given, so that one client is not 2^64 of them.
type clientAddresses struct {
	proxies []netip.Prefix // trusted; none: the peer is the client
}

// of names the client of r: its address, an IPv6 one as its /64
// ("2001:db8:1:2::/64").
func (c clientAddresses) of(r *http.Request) string {
	a := c.address(r)
	switch {
	case !a.IsValid():
		return r.RemoteAddr // no IP: a test's or a Unix socket's peer
	case a.Is4():
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// address is the address of r's client.
func (c clientAddresses) address(r *http.Request) netip.Addr {
	addr := hopAddress(r.RemoteAddr)
	if !c.trusted(addr) {
		return addr
	}
	forwarded := r.Header.Values("X-Forwarded-For")
	for i := len(forwarded) - 1; i >= 0; i-- {
		hops := strings.Split(forwarded[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			a := hopAddress(hops[j])
			if !a.IsValid() {
				// A trusted proxy wrote what is no address ("unknown"):
				// that proxy stands for its client.
				return addr
			}
			if addr = a; !c.trusted(a) {
				return a
			}
		}
	}
	return addr // every hop a trusted proxy: the first
}

func (c clientAddresses) trusted(a netip.Addr) bool {
	for _, p := range c.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// hopAddress is the address of one hop, with or without its port
// ("192.0.2.1", "192.0.2.1:4711", "[2001:db8::1]:4711"); IPv4 as such even
// when written as IPv6, without a zone. It is not valid when s is no
// address.
func hopAddress(s string) netip.Addr {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone("")
}

// ParseTrustedProxies reads the entries of --trusted-proxies: addresses
// (10.0.0.7, 2001:db8::7) and CIDRs (10.0.0.0/8, 2001:db8::/32).
func ParseTrustedProxies(entries []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range entries {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			a, aerr := netip.ParseAddr(e)
			if aerr != nil {
				return nil, err
			}
			a = a.WithZone("")
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
