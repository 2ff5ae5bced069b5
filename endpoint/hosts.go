package endpoint

import (
	"fmt"
	"net"
	"strings"

	"github.com/listgate/listgate/errkind"
)

// hosts decides which Host headers the endpoint answers. A page of
// another site can reach a gateway on a developer's loopback through DNS
// rebinding (its own name, resolving to 127.0.0.1), but its requests then
// name that site as their Host. Without authentication every caller has
// every scope, so only loopback names and the configured ones are
// answered; with authentication a page has no token to send, and any Host
// is answered unless names are configured. An IP address is always
// answered: a page reaching the gateway by rebinding names a host, never
// an address.
type hosts struct {
	names map[string]bool // lower case, without port; nil: any
}

// newHosts answers the configured names ("*": any) and, when the gateway
// is open (no authentication) or names are configured, loopback ones.
func newHosts(names []string, open bool) hosts {
	if len(names) == 0 && !open {
		return hosts{}
	}
	h := hosts{names: map[string]bool{"localhost": true}}
	for _, n := range names {
		if n == "*" {
			return hosts{}
		}
		h.names[strings.ToLower(n)] = true
	}
	return h
}

func (h hosts) check(hostport string) error {
	if h.names == nil {
		return nil
	}
	host := hostport
	if hp, _, err := net.SplitHostPort(hostport); err == nil {
		host = hp
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	// No Host at all comes from no browser.
	if host == "" || h.names[host] || strings.HasSuffix(host, ".localhost") {
		return nil
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	return fmt.Errorf("%w: this gateway does not answer for the host %s: add it to --allowed-hosts (a page of another site reaching a gateway through DNS rebinding names its own host)", errkind.Forbidden, errkind.Quote(hostport))
}
