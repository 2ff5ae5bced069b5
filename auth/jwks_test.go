package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/listgate/listgate/errkind"
)

// idp is an identity provider's JWKS endpoint: it publishes what a test
// sets and counts the fetches.
type idp struct {
	*httptest.Server
	mu    sync.Mutex
	body  []byte
	code  int
	delay time.Duration
	hits  atomic.Int64
}

func newIdP(t *testing.T) *idp {
	p := &idp{code: http.StatusOK}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		p.mu.Lock()
		body, code, delay := p.body, p.code, p.delay
		p.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(body)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *idp) jwksURL() string { return p.URL + "/.well-known/jwks.json" }

// publish makes the endpoint serve a set of the signers' public keys.
func (p *idp) publish(t *testing.T, signers ...signer) {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, s := range signers {
		set.Keys = append(set.Keys, s.jwk(t))
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(http.StatusOK, b)
}

func (p *idp) serve(code int, body []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.code, p.body = code, body
}

// signer is a key an identity provider signs with.
type signer struct {
	kid    string
	method jwt.SigningMethod
	key    crypto.Signer
	use    jwkset.USE
}

func newSigner(t *testing.T, kid string, method jwt.SigningMethod) signer {
	t.Helper()
	var key crypto.Signer
	var err error
	switch method {
	case jwt.SigningMethodRS256, jwt.SigningMethodPS256:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case jwt.SigningMethodES256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jwt.SigningMethodEdDSA:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("no key for %s", method.Alg())
	}
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, method: method, key: key, use: jwkset.UseSig}
}

func (s signer) jwk(t *testing.T) jwkset.JWKMarshal {
	t.Helper()
	k, err := jwkset.NewJWKFromKey(s.key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{
		KID: s.kid, ALG: jwkset.ALG(s.method.Alg()), USE: s.use,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return k.Marshal()
}

const testIssuer, testAudience = "https://idp.example.com/", "listgate"

// claims are a valid token's, expiring in an hour from now.
func tokenClaims(change func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"sub": "recs-service", "iss": testIssuer, "aud": testAudience,
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "lists:read"}
	if change != nil {
		change(c)
	}
	return c
}

// token signs claims with s's key, naming s.kid in its header (no kid
// when empty).
func (s signer) token(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(s.method, c)
	if s.kid != "" {
		tok.Header["kid"] = s.kid
	}
	str, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return str
}

func jwksAuthenticator(t *testing.T, p *idp, cfg Config) *Authenticator {
	t.Helper()
	cfg.JWKSURL, cfg.Issuer, cfg.Audience = p.jwksURL(), testIssuer, testAudience
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func accept(t *testing.T, a *Authenticator, token string) *Principal {
	t.Helper()
	p, err := a.Authenticate("Bearer " + token)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	return p
}

// refuse checks that token is refused as UNAUTHENTICATED, saying want.
func refuse(t *testing.T, a *Authenticator, token, want string) error {
	t.Helper()
	_, err := a.Authenticate("Bearer " + token)
	if !errors.Is(err, errkind.Unauthenticated) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want errkind.Unauthenticated saying %q", err, want)
	}
	return err
}

func hits(t *testing.T, p *idp, want int64) {
	t.Helper()
	if got := p.hits.Load(); got != want {
		t.Fatalf("the JWKS was fetched %d times, want %d", got, want)
	}
}

// Tokens signed by any published key verify, whatever its type; when the
// provider rotates its keys, a token naming the new key fetches the set
// again and verifies, and one signed by the withdrawn key is refused.
func TestJWKSRotation(t *testing.T) {
	p := newIdP(t)
	rsaA := newSigner(t, "rsa-a", jwt.SigningMethodRS256)
	ec := newSigner(t, "ec-1", jwt.SigningMethodES256)
	ed := newSigner(t, "ed-1", jwt.SigningMethodEdDSA)
	p.publish(t, rsaA, ec, ed)
	a := jwksAuthenticator(t, p, Config{})
	if !a.Configured() {
		t.Fatal("a JWKS URL alone does not configure authentication")
	}
	hits(t, p, 1)
	for _, s := range []signer{rsaA, ec, ed} {
		if pr := accept(t, a, s.token(t, tokenClaims(nil))); pr.Name != "recs-service" || !pr.Has(ListsRead) || pr.Has(ListsWrite) {
			t.Fatalf("%s: %+v", s.kid, pr)
		}
	}
	// A PS256 token verifies with an RSA key published without an alg.
	rsaNoAlg := newSigner(t, "rsa-no-alg", jwt.SigningMethodPS256)
	p.publish(t, rsaA, ec, ed, signer{kid: rsaNoAlg.kid, method: jwt.SigningMethodPS256, key: rsaNoAlg.key})
	accept(t, a, rsaNoAlg.token(t, tokenClaims(nil)))
	hits(t, p, 2)

	rsaB := newSigner(t, "rsa-b", jwt.SigningMethodRS256)
	p.publish(t, rsaB, ec)
	a.jwks.now = func() time.Time { return time.Now().Add(time.Minute) } // past the last fetch's rate limit
	accept(t, a, rsaB.token(t, tokenClaims(nil)))
	hits(t, p, 3)
	accept(t, a, ec.token(t, tokenClaims(nil)))
	hits(t, p, 3) // known keys fetch nothing

	refuse(t, a, rsaA.token(t, tokenClaims(nil)), `has no key "rsa-a"`)
	// The withdrawn key's token naming the new key's kid fails its signature.
	forged := signer{kid: rsaB.kid, method: rsaA.method, key: rsaA.key}
	if err := refuse(t, a, forged.token(t, tokenClaims(nil)), "signature is invalid"); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		t.Fatal(err)
	}
	// A token without a kid is tried against the keys that fit its alg.
	accept(t, a, signer{method: ec.method, key: ec.key}.token(t, tokenClaims(nil)))
	refuse(t, a, signer{method: rsaA.method, key: rsaA.key}.token(t, tokenClaims(nil)), "signature is invalid")
}

// Tokens naming keys the set lacks fetch it again at most once a
// MinInterval, however many arrive at once; tokens that arrive while a
// fetch is under way wait for it.
func TestJWKSRefreshIsRateLimited(t *testing.T) {
	p := newIdP(t)
	known := newSigner(t, "known", jwt.SigningMethodES256)
	p.publish(t, known)
	a := jwksAuthenticator(t, p, Config{})
	hits(t, p, 1)

	var offset atomic.Int64 // how far the authenticator's clock is ahead
	a.jwks.now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	flood := func(kids int) {
		t.Helper()
		var wg sync.WaitGroup
		var accepted atomic.Int64
		for i := range kids {
			wg.Go(func() {
				s := signer{kid: fmt.Sprintf("made-up-%d", i), method: known.method, key: known.key}
				if _, err := a.Authenticate("Bearer " + s.token(t, tokenClaims(nil))); err == nil {
					accepted.Add(1)
				}
			})
		}
		wg.Wait()
		if accepted.Load() > 0 {
			t.Fatalf("%d tokens naming made-up keys were accepted", accepted.Load())
		}
	}
	flood(300)
	hits(t, p, 2)
	refuse(t, a, signer{kid: "another", method: known.method, key: known.key}.token(t, tokenClaims(nil)), "fetches it again at most every 1m0s")
	hits(t, p, 2)
	accept(t, a, known.token(t, tokenClaims(nil)))

	offset.Store(int64(a.jwks.policy.MinInterval - 10*time.Second))
	flood(50)
	hits(t, p, 2)
	offset.Store(int64(a.jwks.policy.MinInterval))
	flood(300)
	hits(t, p, 3)

	// After a rotation, the tokens of the new key that arrive together
	// share one fetch, all verifying.
	rotated := newSigner(t, "rotated", jwt.SigningMethodRS256)
	p.publish(t, known, rotated)
	p.mu.Lock()
	p.delay = 200 * time.Millisecond
	p.mu.Unlock()
	offset.Store(int64(2 * a.jwks.policy.MinInterval))
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			_, err := a.Authenticate("Bearer " + rotated.token(t, tokenClaims(nil)))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a token of the new key arriving during its fetch: %v", err)
		}
	}
	hits(t, p, 4)
}

// The hourly refresh withdraws keys no token asks about; after a failed
// fetch it retries every MinInterval.
func TestJWKSPeriodicRefresh(t *testing.T) {
	p := newIdP(t)
	old, next := newSigner(t, "old", jwt.SigningMethodEdDSA), newSigner(t, "next", jwt.SigningMethodEdDSA)
	p.publish(t, old)
	a := jwksAuthenticator(t, p, Config{})
	a.jwks.policy.Refresh, a.jwks.policy.MinInterval = 50*time.Millisecond, 10*time.Millisecond
	p.publish(t, next)
	a.jwks.lastOnDemand = time.Now().Add(time.Hour) // no token fetches the set
	accept(t, a, old.token(t, tokenClaims(nil)))
	ctx := t.Context()
	go a.Run(ctx)
	waitFor(t, func() bool {
		_, err := a.Authenticate("Bearer " + next.token(t, tokenClaims(nil)))
		return err == nil
	})
	refuse(t, a, old.token(t, tokenClaims(nil)), `has no key "old"`)

	// A failed fetch keeps the keys, and is retried sooner.
	p.serve(http.StatusServiceUnavailable, nil)
	n := p.hits.Load()
	waitFor(t, func() bool { return p.hits.Load() >= n+3 })
	accept(t, a, next.token(t, tokenClaims(nil)))
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// A JWKS that cannot be had leaves the gateway starting, refusing its
// tokens with a message saying why, until it loads.
func TestJWKSUnavailable(t *testing.T) {
	s := newSigner(t, "k1", jwt.SigningMethodRS256)
	for _, tc := range []struct {
		name  string
		serve func(p *idp)
		want  string
	}{
		{"unreachable", func(p *idp) { p.Close() }, "did not answer: "},
		{"an error status", func(p *idp) { p.serve(http.StatusNotFound, []byte("not found")) }, "answered HTTP 404, not 200"},
		{"not JSON", func(p *idp) { p.serve(http.StatusOK, []byte("<html>login</html>")) }, "is not a JWK set"},
		{"too large", func(p *idp) { p.serve(http.StatusOK, bytes.Repeat([]byte(" "), 2<<20)) }, "is larger than 1048576 bytes"},
		{"no signing key", func(p *idp) {
			p.serve(http.StatusOK, []byte(`{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"},{"kty":"RSA","kid":"x","use":"enc","n":"AQAB","e":"AQAB"}]}`))
		}, "has no RSA, ECDSA (P-256, P-384, P-521) or Ed25519 signing key among its 2 keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newIdP(t)
			tc.serve(p)
			var log bytes.Buffer
			var logMu sync.Mutex
			a := jwksAuthenticator(t, p, Config{Log: slog.New(slog.NewTextHandler(&lockedWriter{&logMu, &log}, nil))})
			logged := func() string {
				logMu.Lock()
				defer logMu.Unlock()
				return log.String()
			}
			if !strings.Contains(logged(), tc.want) || !strings.Contains(logged(), "refused until it loads") {
				t.Errorf("logged %q, want it to say %q", logged(), tc.want)
			}
			// The first token fetches again, and is told the fetch failed,
			// while the log says why; the next ones, within the minute,
			// are told the keys have not loaded.
			logMu.Lock()
			log.Reset()
			logMu.Unlock()
			refuse(t, a, s.token(t, tokenClaims(nil)), "the identity provider's keys (--jwt-jwks-url) could not be fetched; the gateway's log says why")
			if !strings.Contains(logged(), "JWKS fetch for a token's key failed") || !strings.Contains(logged(), tc.want) {
				t.Errorf("after a token's fetch failed, logged %q, want it to say %q", logged(), tc.want)
			}
			refuse(t, a, s.token(t, tokenClaims(nil)), "the identity provider's keys (--jwt-jwks-url) have not loaded yet, and are fetched again at most every 1m0s; the gateway's log says why")
			if tc.name == "unreachable" {
				return
			}
			p.publish(t, s)
			a.jwks.now = func() time.Time { return time.Now().Add(time.Minute) }
			accept(t, a, s.token(t, tokenClaims(nil)))
		})
	}

	t.Run("too slow", func(t *testing.T) {
		p := newIdP(t)
		p.publish(t, s)
		p.delay = time.Minute
		policy := defaultJWKSPolicy
		policy.Timeout = 100 * time.Millisecond
		j, err := newJWKS(p.jwksURL(), nil, policy)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		j.start()
		if took := time.Since(began); took > 5*time.Second {
			t.Fatalf("the first fetch took %v", took)
		}
		var timeout net.Error
		if err := j.lastError(); !errors.As(err, &timeout) || !timeout.Timeout() || !strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("err = %v, want a timeout", err)
		}
	})

	for _, bad := range []string{"jwks.json", "ftp://idp.example.com/jwks", "https://", "://x"} {
		if _, err := New(Config{JWKSURL: bad}); err == nil {
			t.Errorf("JWKS URL %q accepted", bad)
		}
	}
}

// A JWKS URL's password never reaches the log: every line naming the URL
// masks it, as the start-up line does.
func TestJWKSLogsNoPassword(t *testing.T) {
	p := newIdP(t)
	p.serve(http.StatusNotFound, []byte("not found"))
	withPassword := strings.Replace(p.jwksURL(), "http://", "http://idp:pa55word@", 1)
	var log bytes.Buffer
	var logMu sync.Mutex
	a, err := New(Config{JWKSURL: withPassword, Issuer: testIssuer, Audience: testAudience,
		Log: slog.New(slog.NewTextHandler(&lockedWriter{&logMu, &log}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	refuse(t, a, newSigner(t, "k1", jwt.SigningMethodRS256).token(t, tokenClaims(nil)), "could not be fetched")
	logMu.Lock()
	defer logMu.Unlock()
	if got := log.String(); strings.Contains(got, "pa55word") || !strings.Contains(got, "idp:xxxxx@") {
		t.Errorf("the log, for a JWKS URL with a password:\n%s", got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Only asymmetric signatures by a published signing key verify, with exp
// required and iss and aud checked, and tokens refused before any key is
// looked up fetch nothing.
func TestJWKSRefusesWhatThePEMPathRefuses(t *testing.T) {
	p := newIdP(t)
	rsaKey := newSigner(t, "rsa", jwt.SigningMethodRS256)
	enc := newSigner(t, "enc", jwt.SigningMethodRS256)
	enc.use = jwkset.UseEnc
	pinned := newSigner(t, "pinned", jwt.SigningMethodRS256) // published for RS256 only
	secret := []byte("a shared secret of thirty-two by")
	var set jwkset.JWKSMarshal
	for _, s := range []signer{rsaKey, enc, pinned} {
		set.Keys = append(set.Keys, s.jwk(t))
	}
	set.Keys = append(set.Keys, jwkset.JWKMarshal{KTY: jwkset.KtyOct, KID: "hmac", K: "YSBzaGFyZWQgc2VjcmV0IG9mIHRoaXJ0eS10d28gYnk"})
	b, _ := json.Marshal(set)
	p.serve(http.StatusOK, b)
	a := jwksAuthenticator(t, p, Config{})
	accept(t, a, rsaKey.token(t, tokenClaims(nil)))
	hits(t, p, 1)

	hmacWithKid := func(kid string, key []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, tokenClaims(nil))
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rsaPublicPEM := pemOf(t, rsaKey.key.Public())
	noneTok := jwt.NewWithClaims(jwt.SigningMethodNone, tokenClaims(nil))
	noneTok.Header["kid"] = "rsa"
	none, _ := noneTok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	for _, tc := range []struct{ name, token, want string }{
		{"HMAC with the published secret", hmacWithKid("hmac", secret), "signing method HS256 is invalid"},
		{"HMAC keyed by the RSA public key", hmacWithKid("rsa", rsaPublicPEM), "signing method HS256 is invalid"},
		{"alg none", none, "signing method none is invalid"},
		{"expired", rsaKey.token(t, tokenClaims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), "token is expired"},
		{"no exp", rsaKey.token(t, tokenClaims(func(c jwt.MapClaims) { delete(c, "exp") })), "exp claim is required"},
		{"wrong issuer", rsaKey.token(t, tokenClaims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com/" })), "invalid issuer"},
		{"wrong audience", rsaKey.token(t, tokenClaims(func(c jwt.MapClaims) { c["aud"] = "other" })), "invalid audience"},
		{"a key of another type", signer{kid: "rsa", method: jwt.SigningMethodES256, key: newSigner(t, "", jwt.SigningMethodES256).key}.token(t, tokenClaims(nil)), `key "rsa" does not fit alg ES256`},
		{"a key published for another alg", signer{kid: "pinned", method: jwt.SigningMethodPS256, key: pinned.key}.token(t, tokenClaims(nil)), `key "pinned" does not fit alg PS256`},
		{"kid not a string", func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, tokenClaims(nil))
			tok.Header["kid"] = 7
			s, _ := tok.SignedString(rsaKey.key)
			return s
		}(), "kid is not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refuse(t, a, tc.token, tc.want)
		})
	}
	hits(t, p, 1)
	// An encryption key, and a symmetric one, are not in the set at all.
	refuse(t, a, enc.token(t, tokenClaims(nil)), `has no key "enc"`)
	hits(t, p, 2)
	refuse(t, a, signer{kid: "hmac", method: jwt.SigningMethodRS256, key: rsaKey.key}.token(t, tokenClaims(nil)), `has no key "hmac"`)
}

// A JWKS goes with PEM keys and API keys: each verifies its own tokens.
func TestJWKSWithPEMKeysAndAPIKeys(t *testing.T) {
	p := newIdP(t)
	published := newSigner(t, "published", jwt.SigningMethodRS256)
	p.publish(t, published)
	pemKey := newSigner(t, "", jwt.SigningMethodRS256)
	a := jwksAuthenticator(t, p, Config{
		APIKeys: []string{"ops " + hash("the-key") + " features:admin"},
		JWTKeys: pemOf(t, pemKey.key.Public()),
	})
	if pr := accept(t, a, "the-key"); pr.Name != "ops" || !pr.Has(FeaturesAdmin) {
		t.Fatalf("API key: %+v", pr)
	}
	accept(t, a, published.token(t, tokenClaims(nil)))
	accept(t, a, pemKey.token(t, tokenClaims(nil)))
	// A PEM key's token may name a kid of its own signer's.
	accept(t, a, signer{kid: "pem-1", method: pemKey.method, key: pemKey.key}.token(t, tokenClaims(nil)))
	stranger := newSigner(t, "stranger", jwt.SigningMethodRS256)
	err := refuse(t, a, stranger.token(t, tokenClaims(nil)), "signature is invalid")
	if !strings.Contains(err.Error(), `has no key "stranger"`) {
		t.Fatalf("err = %v, want it to say the JWKS has no such key", err)
	}
	refuse(t, a, "not-the-key", "not a valid API key or JWT")
}

// The scopes of the identity providers' own token shapes: Azure AD's scp
// is a space-separated string, Okta's a list.
func TestJWKSProviderScopes(t *testing.T) {
	p := newIdP(t)
	s := newSigner(t, "nOo3ZDrODXEK1jKWhXslHR_KXEg", jwt.SigningMethodRS256)
	p.publish(t, s)
	a := jwksAuthenticator(t, p, Config{})
	for _, tc := range []struct {
		name   string
		claims jwt.MapClaims
		want   []string
	}{
		{"Azure AD", jwt.MapClaims{"aud": testAudience, "iss": testIssuer, "sub": "AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ",
			"azp": "6e74172b-be56-4843-9ff4-e66a39bb12e3", "ver": "2.0", "scp": "lists:read lists:write",
			"iat": time.Now().Unix(), "nbf": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}, []string{ListsRead, ListsWrite}},
		{"Okta", jwt.MapClaims{"ver": 1, "jti": "AT.0mP4JKAZX1iACIT4vbEDF7LpvDVjxypPMf0D7uX39RE", "iss": testIssuer, "aud": testAudience,
			"cid": "0oa1u8x3hg0BWlmVN0h8", "uid": "00u1u8x3hg0BWlmVN0h8", "sub": "reader@example.com", "scp": []string{"openid", "lists:read", "features:admin"},
			"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}, []string{ListsRead, FeaturesAdmin}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := accept(t, a, s.token(t, tc.claims))
			for _, scope := range Scopes {
				if pr.Has(scope) != contains(tc.want, scope) {
					t.Errorf("Has(%s) = %v", scope, pr.Has(scope))
				}
			}
			if pr.Name != tc.claims["sub"] || pr.Expires.Unix() != tc.claims["exp"] {
				t.Errorf("principal %+v", pr)
			}
		})
	}
}

// Whatever a JWKS holds, reading it never panics, and only asymmetric
// keys come out of it.
func FuzzJWKSKeys(f *testing.F) {
	for _, s := range []string{
		`{"keys":[{"kty":"RSA","kid":"r","use":"sig","alg":"RS256","n":"AQAB","e":"AQAB"}]}`,
		`{"keys":[{"kty":"EC","kid":"e","crv":"P-256","x":"AQ","y":"AQ"}]}`,
		`{"keys":[{"kty":"OKP","kid":"o","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`,
		`{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"},{"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB","x5c":["AA=="]}]}`,
		`{"keys":[{"kty":"EC","crv":"P-521","x":"","y":"AQ","d":"AQ","key_ops":["verify"]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var set jwkset.JWKSMarshal
		if json.Unmarshal(body, &set) != nil {
			return
		}
		for _, k := range usableKeys(set) {
			switch k.key.(type) {
			case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
			default:
				t.Fatalf("a %T key was kept", k.key)
			}
			for _, alg := range jwtAlgs {
				keyFits(alg, k.key)
			}
		}
	})
}

// A caller is named by the kind of its credentials, so that an API key
// and a JWT subject of one name are two callers, and JWTs of one subject
// from two issuers too; a JWT without a subject names no caller and is
// refused. What a caller is told of a key the JWKS lacks never names the
// JWKS's URL: that is the network's, for the log.
func TestCallersAreNamespaced(t *testing.T) {
	p := newIdP(t)
	s := newSigner(t, "k1", jwt.SigningMethodES256)
	p.publish(t, s)
	a := jwksAuthenticator(t, p, Config{APIKeys: []string{"recs-service " + hash("the-key") + " lists:read"}})
	key, err := a.Authenticate("Bearer the-key")
	if err != nil {
		t.Fatal(err)
	}
	token := accept(t, a, s.token(t, tokenClaims(nil)))
	if key.Caller != "key:recs-service" || token.Caller != "jwt:"+testIssuer+"/recs-service" || key.Name != token.Name {
		t.Fatalf("callers %q and %q, names %q and %q", key.Caller, token.Caller, key.Name, token.Name)
	}
	refuse(t, a, s.token(t, tokenClaims(func(c jwt.MapClaims) { delete(c, "sub") })), "no sub claim")
	err = refuse(t, a, newSigner(t, "unknown", jwt.SigningMethodES256).token(t, tokenClaims(nil)), `has no key "unknown"`)
	if host := strings.TrimPrefix(p.jwksURL(), "http://"); strings.Contains(err.Error(), host[:strings.IndexByte(host, '/')]) {
		t.Fatalf("a caller is told the JWKS's address: %v", err)
	}
}
