package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/listgate/listgate/errkind"
)

func hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func pemOf(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestAPIKeys(t *testing.T) {
	a, err := New(Config{APIKeys: []string{
		"reader " + hash("r-secret") + " lists:read",
		"writer " + hash("w-secret") + " lists:read,lists:write",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Configured() {
		t.Fatal("not configured")
	}
	for _, tc := range []struct {
		header, name string
		scopes       []string
		err          bool
	}{
		{"Bearer r-secret", "reader", []string{ListsRead}, false},
		{"Bearer w-secret", "writer", []string{ListsRead, ListsWrite}, false},
		{"", "", nil, true},
		{"Bearer ", "", nil, true},
		{"Basic r-secret", "", nil, true},
		{"Bearer r-secret2", "", nil, true},
		{"Bearer " + hash("r-secret"), "", nil, true}, // the stored hash is not a key
		{"bearer r-secret", "", nil, true},
	} {
		p, err := a.Authenticate(tc.header)
		if tc.err {
			if !errors.Is(err, errkind.Unauthenticated) {
				t.Errorf("%q: err = %v, want errkind.Unauthenticated", tc.header, err)
			}
			continue
		}
		if err != nil || p.Name != tc.name {
			t.Fatalf("%q: %v, %v", tc.header, p, err)
		}
		for _, s := range Scopes {
			if p.Has(s) != contains(tc.scopes, s) {
				t.Errorf("%q: Has(%s) = %v", tc.header, s, p.Has(s))
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestBadAPIKeyConfig(t *testing.T) {
	for _, line := range []string{
		"reader",
		"reader r-secret lists:read",               // not a hash
		"reader " + hash("x") + " lists:delete",    // unknown scope
		"reader " + hash("x") + " lists:read more", // too many fields
	} {
		if _, err := New(Config{APIKeys: []string{line}}); err == nil {
			t.Errorf("%q accepted", line)
		}
	}
}

func TestReadAPIKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	body := "# readers\n\nreader " + hash("k") + " lists:read\n  admin " + hash("a") + " features:admin  \n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err := ReadAPIKeys(path)
	if err != nil || len(lines) != 2 {
		t.Fatalf("ReadAPIKeys = %q, %v", lines, err)
	}
	if _, err := New(Config{APIKeys: lines}); err != nil {
		t.Fatal(err)
	}
}

func TestNoConfigLetsAnyoneIn(t *testing.T) {
	a, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate("")
	if err != nil || a.Configured() || !p.Has(FeaturesAdmin) {
		t.Fatalf("%v %v %v", p, err, a.Configured())
	}
}

func TestJWT(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	edPub, edKey, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	keys := append(append(pemOf(t, &rsaKey.PublicKey), pemOf(t, &ecKey.PublicKey)...), pemOf(t, edPub)...)
	a, err := New(Config{JWTKeys: keys, Issuer: "https://auth.example.com", Audience: "listgate"})
	if err != nil {
		t.Fatal(err)
	}
	valid := func() jwt.MapClaims {
		return jwt.MapClaims{"sub": "recs-service", "iss": "https://auth.example.com", "aud": "listgate",
			"exp": time.Now().Add(time.Hour).Unix(), "scope": "lists:read lists:write unknown:scope"}
	}
	sign := func(method jwt.SigningMethod, key any, c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for name, token := range map[string]string{
		"RS256": sign(jwt.SigningMethodRS256, rsaKey, valid()),
		"ES256": sign(jwt.SigningMethodES256, ecKey, valid()),
		"EdDSA": sign(jwt.SigningMethodEdDSA, edKey, valid()),
	} {
		p, err := a.Authenticate("Bearer " + token)
		if err != nil || p.Name != "recs-service" || !p.Has(ListsWrite) || p.Has(FeaturesAdmin) {
			t.Errorf("%s: %+v, %v", name, p, err)
		}
	}
	withScp := valid()
	delete(withScp, "scope")
	withScp["scp"] = []string{"features:admin"}
	if p, err := a.Authenticate("Bearer " + sign(jwt.SigningMethodRS256, rsaKey, withScp)); err != nil || !p.Has(FeaturesAdmin) {
		t.Errorf("scp claim: %+v, %v", p, err)
	}

	expired, wrongIss, wrongAud, noExp := valid(), valid(), valid(), valid()
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	wrongIss["iss"] = "https://evil.example.com"
	wrongAud["aud"] = "other"
	delete(noExp, "exp")
	hmac := sign(jwt.SigningMethodHS256, []byte("secret"), valid())
	none := sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid())
	for name, token := range map[string]string{
		"expired":         sign(jwt.SigningMethodRS256, rsaKey, expired),
		"wrong issuer":    sign(jwt.SigningMethodRS256, rsaKey, wrongIss),
		"wrong audience":  sign(jwt.SigningMethodRS256, rsaKey, wrongAud),
		"no expiry":       sign(jwt.SigningMethodRS256, rsaKey, noExp),
		"unknown key":     sign(jwt.SigningMethodRS256, otherKey, valid()),
		"HMAC":            hmac,
		"alg none":        none,
		"tampered":        strings.Replace(sign(jwt.SigningMethodRS256, rsaKey, valid()), ".", ".x", 1),
		"three dots only": "a.b.c",
	} {
		if _, err := a.Authenticate("Bearer " + token); !errors.Is(err, errkind.Unauthenticated) {
			t.Errorf("%s: err = %v, want errkind.Unauthenticated", name, err)
		}
	}
	if _, err := New(Config{JWTKeys: []byte("not a PEM")}); err == nil {
		t.Error("a JWT key file without keys was accepted")
	}
}

// Authenticate never panics, and only the configured key gets in.
func FuzzAuthenticate(f *testing.F) {
	a, err := New(Config{APIKeys: []string{"k " + hash("the-key") + " lists:read"}, JWTKeys: pemOf(&testing.T{}, ed25519.PublicKey(make([]byte, 32)))})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"Bearer the-key", "Bearer a.b.c", "Bearer eyJhbGciOiJub25lIn0.e30.", "Basic x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		p, err := a.Authenticate(header)
		if err == nil && header != "Bearer the-key" {
			t.Fatalf("%q let in as %v", header, p)
		}
	})
}

func signed(t *testing.T, method jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func jwtAuthenticator(t *testing.T, pubs ...any) *Authenticator {
	t.Helper()
	var pems []byte
	for _, pub := range pubs {
		pems = append(pems, pemOf(t, pub)...)
	}
	a, err := New(Config{JWTKeys: pems, Issuer: "https://auth.example.com", Audience: "listgate"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// scope and scp each decode as a space-separated string or a list of
// strings; unknown scopes are ignored; any other form is refused.
func TestJWTScopeClaims(t *testing.T) {
	edPub, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a := jwtAuthenticator(t, edPub)
	for _, tc := range []struct {
		name    string
		claims  map[string]any
		scopes  []string
		wantErr string
	}{
		{"scope string", map[string]any{"scope": "lists:read lists:write"}, []string{ListsRead, ListsWrite}, ""},
		{"scope list", map[string]any{"scope": []string{"lists:read", "features:admin"}}, []string{ListsRead, FeaturesAdmin}, ""},
		{"scp string", map[string]any{"scp": "lists:write features:admin"}, []string{ListsWrite, FeaturesAdmin}, ""},
		{"scp list", map[string]any{"scp": []string{"lists:read"}}, []string{ListsRead}, ""},
		{"scope string and scp list", map[string]any{"scope": "lists:read", "scp": []string{"lists:write"}}, []string{ListsRead, ListsWrite}, ""},
		{"scope list and scp string", map[string]any{"scope": []string{"lists:read"}, "scp": "features:admin"}, []string{ListsRead, FeaturesAdmin}, ""},
		{"unknown scopes ignored in strings", map[string]any{"scope": "openid  lists:read profile", "scp": "email lists:write"}, []string{ListsRead, ListsWrite}, ""},
		{"unknown scopes ignored in lists", map[string]any{"scope": []string{"openid", "features:admin"}, "scp": []string{"lists:read lists:write"}}, []string{FeaturesAdmin}, ""},
		{"empty list", map[string]any{"scp": []string{}}, nil, ""},
		{"null", map[string]any{"scope": nil}, nil, ""},
		{"no scope claim", map[string]any{}, nil, ""},
		{"scope number", map[string]any{"scope": 5}, nil, "scope claim must be a string or a list of strings"},
		{"scp object", map[string]any{"scp": map[string]any{"lists:read": true}}, nil, "scope claim must be a string or a list of strings"},
		{"scope list with a number", map[string]any{"scope": []any{"lists:read", 1}}, nil, "scope claim must be a string or a list of strings"},
		{"scp bool", map[string]any{"scp": true}, nil, "scope claim must be a string or a list of strings"},
		{"scp list of lists", map[string]any{"scp": []any{[]string{"lists:read"}}}, nil, "scope claim must be a string or a list of strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := jwt.MapClaims{"sub": "svc", "iss": "https://auth.example.com", "aud": "listgate",
				"exp": time.Now().Add(time.Hour).Unix()}
			for k, v := range tc.claims {
				c[k] = v
			}
			p, err := a.Authenticate("Bearer " + signed(t, jwt.SigningMethodEdDSA, edKey, c))
			if tc.wantErr != "" {
				if !errors.Is(err, errkind.Unauthenticated) || !errors.Is(err, errScopeClaim) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want errkind.Unauthenticated saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range Scopes {
				if p.Has(s) != contains(tc.scopes, s) {
					t.Errorf("Has(%s) = %v, want %v", s, p.Has(s), !p.Has(s))
				}
			}
		})
	}
}

// With several keys, a failing token reports the most relevant error: a
// claims error from the key that verified it, else a signature error from
// keys of its type, else that no key fits its alg; never another key
// type's complaint, whatever the keys' order.
func TestJWTErrorMostRelevant(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaOther, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ec256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec256Other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	edPub, edKey, _ := ed25519.GenerateKey(rand.Reader)
	_, edOther, _ := ed25519.GenerateKey(rand.Reader)
	rsaPub, ec256Pub, ec384Pub := &rsaKey.PublicKey, &ec256.PublicKey, &ec384.PublicKey

	now := time.Now()
	claims := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "svc", "iss": "https://auth.example.com", "aud": "listgate",
			"exp": now.Add(time.Hour).Unix(), "scope": "lists:read"}
		if change != nil {
			change(c)
		}
		return c
	}
	expired := claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() })
	notYet := claims(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() })
	wrongIss := claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" })
	wrongAud := claims(func(c jwt.MapClaims) { c["aud"] = "other" })
	noExp := claims(func(c jwt.MapClaims) { delete(c, "exp") })

	for _, tc := range []struct {
		name  string
		keys  []any
		token string
		want  []error // every one must be in the chain; nil: accepted
		msg   string  // and, when set, in the message
	}{
		{"expired EdDSA, keys Ed25519 then RSA", []any{edPub, rsaPub},
			signed(t, jwt.SigningMethodEdDSA, edKey, expired), []error{jwt.ErrTokenExpired}, "token is expired"},
		{"expired EdDSA, keys RSA then Ed25519", []any{rsaPub, edPub},
			signed(t, jwt.SigningMethodEdDSA, edKey, expired), []error{jwt.ErrTokenExpired}, "token is expired"},
		{"expired EdDSA, keys Ed25519, RSA, ECDSA", []any{edPub, rsaPub, ec256Pub},
			signed(t, jwt.SigningMethodEdDSA, edKey, expired), []error{jwt.ErrTokenExpired}, "token is expired"},
		{"expired RS256, keys RSA then Ed25519", []any{rsaPub, edPub},
			signed(t, jwt.SigningMethodRS256, rsaKey, expired), []error{jwt.ErrTokenExpired}, ""},
		{"not valid yet ES256, keys ECDSA then Ed25519", []any{ec256Pub, edPub},
			signed(t, jwt.SigningMethodES256, ec256, notYet), []error{jwt.ErrTokenNotValidYet}, ""},
		{"wrong issuer RS256, keys RSA then Ed25519", []any{rsaPub, edPub},
			signed(t, jwt.SigningMethodRS256, rsaKey, wrongIss), []error{jwt.ErrTokenInvalidIssuer}, ""},
		{"wrong audience PS256, keys RSA then ECDSA", []any{rsaPub, ec256Pub},
			signed(t, jwt.SigningMethodPS256, rsaKey, wrongAud), []error{jwt.ErrTokenInvalidAudience}, ""},
		{"no exp EdDSA, keys Ed25519 then RSA", []any{edPub, rsaPub},
			signed(t, jwt.SigningMethodEdDSA, edKey, noExp), []error{jwt.ErrTokenRequiredClaimMissing}, ""},

		{"wrong signature EdDSA, keys Ed25519 then RSA", []any{edPub, rsaPub},
			signed(t, jwt.SigningMethodEdDSA, edOther, claims(nil)), []error{jwt.ErrTokenSignatureInvalid, jwt.ErrEd25519Verification}, ""},
		{"wrong signature EdDSA, keys RSA then Ed25519", []any{rsaPub, edPub},
			signed(t, jwt.SigningMethodEdDSA, edOther, claims(nil)), []error{jwt.ErrTokenSignatureInvalid, jwt.ErrEd25519Verification}, ""},
		{"wrong signature RS256, keys RSA then Ed25519", []any{rsaPub, edPub},
			signed(t, jwt.SigningMethodRS256, rsaOther, claims(nil)), []error{jwt.ErrTokenSignatureInvalid, rsa.ErrVerification}, ""},
		{"wrong signature ES256, keys ECDSA then RSA", []any{ec256Pub, rsaPub},
			signed(t, jwt.SigningMethodES256, ec256Other, claims(nil)), []error{jwt.ErrTokenSignatureInvalid, jwt.ErrECDSAVerification}, ""},
		// The signature is checked before the claims: a key that does not
		// verify the token never reports its claims.
		{"expired and wrong signature EdDSA, keys Ed25519 then RSA", []any{edPub, rsaPub},
			signed(t, jwt.SigningMethodEdDSA, edOther, expired), []error{jwt.ErrTokenSignatureInvalid, jwt.ErrEd25519Verification}, ""},

		{"EdDSA with no Ed25519 key", []any{rsaPub, ec256Pub},
			signed(t, jwt.SigningMethodEdDSA, edKey, claims(nil)), []error{jwt.ErrTokenUnverifiable}, "no configured key fits alg EdDSA"},
		{"ES384 with only a P-256 key", []any{ec256Pub, rsaPub},
			signed(t, jwt.SigningMethodES384, ec384, claims(nil)), []error{jwt.ErrTokenUnverifiable}, "no configured key fits alg ES384"},
		{"RS256 with no RSA key", []any{edPub},
			signed(t, jwt.SigningMethodRS256, rsaKey, claims(nil)), []error{jwt.ErrTokenUnverifiable}, "no configured key fits alg RS256"},

		{"valid RS256 signed by the second RSA key", []any{&rsaOther.PublicKey, edPub, rsaPub},
			signed(t, jwt.SigningMethodRS256, rsaKey, claims(nil)), nil, ""},
		{"valid ES384 among P-256 and P-384 keys", []any{ec256Pub, ec384Pub},
			signed(t, jwt.SigningMethodES384, ec384, claims(nil)), nil, ""},
		{"valid EdDSA after RSA and ECDSA keys", []any{rsaPub, ec256Pub, edPub},
			signed(t, jwt.SigningMethodEdDSA, edKey, claims(nil)), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := jwtAuthenticator(t, tc.keys...).Authenticate("Bearer " + tc.token)
			if tc.want == nil {
				if err != nil || !p.Has(ListsRead) {
					t.Fatalf("%+v, %v", p, err)
				}
				return
			}
			if !errors.Is(err, errkind.Unauthenticated) {
				t.Fatalf("err = %v, want errkind.Unauthenticated", err)
			}
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want %v in its chain", err, want)
				}
			}
			if errors.Is(err, jwt.ErrInvalidKeyType) {
				t.Errorf("err = %v: another key type's complaint", err)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want it to say %q", err, tc.msg)
			}
		})
	}
}
