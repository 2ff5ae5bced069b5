package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/golang-jwt/jwt/v5"
)

// jwksEndpoint publishes the public keys of the given signers, keyed by kid.
type jwksEndpoint struct {
	mu   sync.Mutex
	keys map[string]crypto.Signer
}

func (e *jwksEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var set jwkset.JWKSMarshal
	for kid, key := range e.keys {
		k, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgES256, USE: jwkset.UseSig}})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		set.Keys = append(set.Keys, k.Marshal())
	}
	json.NewEncoder(w).Encode(set)
}

func (e *jwksEndpoint) publish(keys map[string]crypto.Signer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keys = keys
}

// A gateway in production mode whose only authentication is an identity
// provider's JWKS serves requests and subscriptions to the tokens its keys
// sign, and follows the provider's key rotation.
func TestJWKSAuthenticatesThroughTheGateway(t *testing.T) {
	k1, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	idp := &jwksEndpoint{keys: map[string]crypto.Signer{"k1": k1}}
	srv := httptest.NewServer(idp)
	defer srv.Close()
	const issuer = "https://login.example.com/tenant/v2.0"
	token := func(kid string, key crypto.Signer, scp any) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
			"iss": issuer, "aud": "listgate", "sub": "svc-" + kid, "scp": scp,
			"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
		})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := start(t, "--mode", "prod", "--data-dir", t.TempDir(),
		"--jwt-jwks-url", srv.URL+"/discovery/v2.0/keys", "--jwt-issuer", issuer, "--jwt-audience", "listgate")

	admin := token("k1", k1, "features:admin lists:write")      // Azure AD's scp: a string
	reader := token("k1", k1, []string{"openid", "lists:read"}) // Okta's: a list
	if status, body := postAs(t, base, admin, `mutation { createListFeature(input: {entityType: "user", name: "seen", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`); status != http.StatusOK || strings.Contains(body, "errors") {
		t.Fatalf("create with a JWKS-verified token: %d %s", status, body)
	}

	// A subscription authenticated by its connection_init's token.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var m struct {
		Type    string
		Payload json.RawMessage
	}
	if err := wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + reader}}); err != nil {
		t.Fatal(err)
	}
	if err := wsjson.Read(ctx, c, &m); err != nil || m.Type != "connection_ack" {
		t.Fatalf("connection_init: %+v %v", m, err)
	}
	if err := wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query": `subscription { listItemsAdded(entityType: "user", entityId: "u1", feature: "seen") { value } }`}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the subscription's poller is reading the list

	// The provider rotates to k2: k2's first token fetches the keys again.
	idp.publish(map[string]crypto.Signer{"k2": k2})
	writer := token("k2", k2, "lists:write")
	if status, body := postAs(t, base, writer, `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "seen"}, items: [{value: "story1"}]) { added } }`); status != http.StatusOK || !strings.Contains(body, `"added":1`) {
		t.Fatalf("add with the rotated key's token: %d %s", status, body)
	}
	if err := wsjson.Read(ctx, c, &m); err != nil || m.Type != "next" || !strings.Contains(string(m.Payload), "story1") {
		t.Fatalf("the subscription got %+v, %v", m, err)
	}

	for name, tc := range map[string]struct{ token, want string }{
		"the withdrawn key's token": {token("k1", k1, "lists:read"), `has no key \"k1\"`},
		"no token":                  {"", "send Authorization: Bearer"},
		"an HMAC token":             {hmacToken(t, issuer), "signing method HS256 is invalid"},
	} {
		status, body := postAs(t, base, tc.token, `{ listFeatures { key } }`)
		if status != http.StatusUnauthorized || !strings.Contains(body, "UNAUTHENTICATED") || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 401 saying %q", name, status, body, tc.want)
		}
	}
	// A reader's token still needs its scope.
	if _, body := postAs(t, base, token("k2", k2, []string{"lists:read"}), `mutation { removeAllListItems(list: {entityType: "user", entityId: "u1", feature: "seen"}) }`); !strings.Contains(body, "FORBIDDEN") {
		t.Errorf("a reader removing: %s", body)
	}
}

// --jwt-jwks-url (or LISTGATE_JWT_JWKS_URL) is authentication enough for
// production, and must be an http or https URL.
func TestJWKSURLConfig(t *testing.T) {
	const u = "https://idp.example.com/.well-known/jwks.json"
	env := func(name string) string {
		if name == "LISTGATE_JWT_JWKS_URL" {
			return u
		}
		return ""
	}
	if c, err := parseConfig([]string{"--mode", "prod", "--jwt-audience", "listgate"}, env, io.Discard); err != nil || c.JWTJWKSURL != u {
		t.Fatalf("from the environment: %q, %v", c.JWTJWKSURL, err)
	}
	// Without an audience, any token the provider signs for any
	// application would verify.
	if _, err := parseConfig([]string{"--mode", "prod"}, env, io.Discard); err == nil || !strings.Contains(err.Error(), "--jwt-audience") {
		t.Fatalf("prod with a JWKS and no audience: %v", err)
	}
	for _, bad := range []string{"idp.example.com/jwks", "ftp://idp.example.com/jwks", "https:///jwks"} {
		_, err := parseConfig([]string{"--jwt-jwks-url", bad}, func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--jwt-jwks-url") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func hmacToken(t *testing.T, issuer string) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": issuer, "aud": "listgate", "sub": "x", "scp": "lists:read", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// postAs POSTs query with token as its bearer (none when empty).
func postAs(t *testing.T, base, token, query string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
