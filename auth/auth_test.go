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
			if !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("%q: err = %v, want ErrUnauthenticated", tc.header, err)
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
		if _, err := a.Authenticate("Bearer " + token); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: err = %v, want ErrUnauthenticated", name, err)
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
