package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"

	"github.com/listgate/listgate/endpoint"
)

// jsonRefusals wraps a listener so that its connections answer in the
// endpoint's JSON shape the one refusal net/http writes itself, as plain
// text, before any handler runs: 431 to a request whose line (a GET's URL
// with its query string) and headers are past --max-header-bytes. net/http
// reads at most that and 4 KiB more of such a request, so memory stays
// bounded.
func jsonRefusals(ln net.Listener, maxHeaderBytes int) net.Listener {
	msg := fmt.Sprintf("the request's line and headers are past %d bytes (--max-header-bytes): send a long query in a POST body, or by documentId", maxHeaderBytes)
	body, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{"message": msg, "extensions": map[string]string{"code": endpoint.CodeBadRequest}}}})
	answer := fmt.Appendf(nil, "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	return refusingListener{ln, answer}
}

type refusingListener struct {
	net.Listener
	answer []byte
}

func (l refusingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return refusingConn{c, l.answer}, nil
}

// netHTTP431 is net/http's own 431, which it writes whole, in one Write to
// the connection. Only a Write of exactly these bytes is replaced: a
// response's writes never are (its last ends with its body's end), so no
// stored value, however placed in a page, can be taken for it.
var netHTTP431 = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large")

type refusingConn struct {
	net.Conn
	answer []byte
}

func (c refusingConn) Write(p []byte) (int, error) {
	if !bytes.Equal(p, netHTTP431) {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(c.answer); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseWrite is the TCP connection's: net/http half-closes a connection it
// refused, so that the client reads the answer before the connection
// resets under the rest of what it sends.
func (c refusingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
