// Package auth decides who is calling: it checks a request's bearer token,
// an API key or a JWT, and yields the caller's scopes. It never decides
// what a scope allows; the schema's @scope directives do (graph).
package auth

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/listgate/listgate/errkind"
)

// The scopes a token can grant.
const (
	ListsRead     = "lists:read"     // queries
	ListsWrite    = "lists:write"    // adds and removes
	FeaturesAdmin = "features:admin" // creating and deleting features and versions
	// DocumentsAny lets a caller send operations that are not trusted
	// documents when --trusted-documents enforces them.
	DocumentsAny = "documents:any"
)

// Scopes are all the scopes there are.
var Scopes = []string{ListsRead, ListsWrite, FeaturesAdmin, DocumentsAny}

// Principal is an authenticated caller.
type Principal struct {
	Name string
	// Caller names the caller among all others, namespaced by the kind of
	// its credentials: key:<API key name>, or jwt:<iss>/<sub>, so that an
	// API key and a JWT subject of one name are never one caller. Empty for
	// Anyone.
	Caller string
	// Expires is when the caller's JWT expires (zero for an API key): a
	// WebSocket authenticated by it closes then.
	Expires time.Time
	// Cost is the caller's own cost budget, when its API key or JWT names
	// one; zero fields take the gateway's.
	Cost   CostBudget
	scopes []string
}

// CostBudget is a caller's budget of complexity points: Rate per second,
// up to Burst at once.
type CostBudget struct {
	Rate, Burst float64
}

// Has reports whether the caller was granted scope.
func (p *Principal) Has(scope string) bool { return slices.Contains(p.scopes, scope) }

// Anyone is the caller when authentication is not configured (development
// only): every scope of the lists and features. Trusted documents, when
// enforced, hold for it too.
var Anyone = &Principal{Name: "anonymous", scopes: []string{ListsRead, ListsWrite, FeaturesAdmin}}

// Config says which tokens are valid.
type Config struct {
	// APIKeys are lines "name sha256-hex scope[,scope…]": the SHA-256 of
	// each key, never the key itself.
	APIKeys []string
	// JWTKeys are PEM public keys (RSA, ECDSA or Ed25519) that sign valid
	// JWTs; so are the keys an identity provider publishes at JWKSURL.
	// Issuer and Audience, when set, must match the token's.
	JWTKeys  []byte
	JWKSURL  string
	Issuer   string
	Audience string
	// Log gets the JWKS's fetch failures (nil: dropped).
	Log *slog.Logger
}

// Authenticator checks bearer tokens.
type Authenticator struct {
	keys    []apiKey
	jwtKeys []crypto.PublicKey
	// keysByAlg holds, for each accepted alg, the configured keys of the
	// type (and, for ECDSA, the curve) that alg verifies with.
	keysByAlg map[string][]jwt.VerificationKey
	jwks      *jwks // nil without a JWKS URL
	parser    *jwt.Parser
	disabled  bool
}

type apiKey struct {
	name   string
	hash   [sha256.Size]byte
	scopes []string
	cost   CostBudget
}

// New builds an authenticator. With neither API keys nor JWT keys it lets
// everyone in with every scope (Configured reports false). With a JWKS URL
// it fetches the keys there once (in at most 5 s); a failure is logged and
// only refuses the JWTs those keys would verify until a fetch succeeds
// (see Run).
func New(cfg Config) (*Authenticator, error) {
	keys, err := parseAPIKeys(cfg.APIKeys)
	if err != nil {
		return nil, err
	}
	a := &Authenticator{keys: keys}
	rest := cfg.JWTKeys
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		key, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("JWT key %d: %w", len(a.jwtKeys)+1, err)
		}
		switch key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			return nil, fmt.Errorf("JWT key %d: %T is not an RSA, ECDSA or Ed25519 public key", len(a.jwtKeys)+1, key)
		}
		a.jwtKeys = append(a.jwtKeys, key)
	}
	if len(cfg.JWTKeys) > 0 && len(a.jwtKeys) == 0 {
		return nil, errors.New("JWT keys: no PEM public key found")
	}
	a.keysByAlg = map[string][]jwt.VerificationKey{}
	for _, alg := range jwtAlgs {
		for _, key := range a.jwtKeys {
			if keyFits(alg, key) {
				a.keysByAlg[alg] = append(a.keysByAlg[alg], key)
			}
		}
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(jwtAlgs),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(30 * time.Second),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	a.parser = jwt.NewParser(opts...)
	if cfg.JWKSURL != "" {
		j, err := newJWKS(cfg.JWKSURL, cfg.Log, defaultJWKSPolicy)
		if err != nil {
			return nil, fmt.Errorf("JWKS URL: %w", err)
		}
		j.start()
		a.jwks = j
	}
	a.disabled = len(a.keys) == 0 && len(a.jwtKeys) == 0 && a.jwks == nil
	return a, nil
}

// Configured reports whether any API key, JWT key or JWKS URL is set.
func (a *Authenticator) Configured() bool { return !a.disabled }

// Callers are the kinds of caller it lets in, as Principal.Caller names
// them, each API key by name: key:<name> for each key, jwt: when JWTs
// verify, and addr: (a client's address) when nobody authenticates.
func (a *Authenticator) Callers() []string {
	if a.disabled {
		return []string{"addr:"}
	}
	var out []string
	for _, k := range a.keys {
		out = append(out, "key:"+k.name)
	}
	if len(a.jwtKeys) > 0 || a.jwks != nil {
		out = append(out, "jwt:")
	}
	return out
}

// Run fetches the JWKS's keys again every hour (every minute while its
// last fetch failed) until ctx ends. Without a JWKS URL it returns at once.
func (a *Authenticator) Run(ctx context.Context) {
	if a.jwks != nil {
		a.jwks.run(ctx)
	}
}

func parseAPIKeys(lines []string) ([]apiKey, error) {
	var keys []apiKey
	for i, line := range lines {
		k, err := parseAPIKey(line)
		if err != nil {
			return nil, fmt.Errorf("API key %d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// CheckAPIKeys checks API key lines as New reads them, at start-up before
// anything is opened, and that each key's own burst covers maxComplexity,
// as --caller-cost-burst must: an operation the gateway allows must fit
// in a full bucket, or it would run whatever its key's budget said.
func CheckAPIKeys(lines []string, maxComplexity int) error {
	keys, err := parseAPIKeys(lines)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if k.cost.Rate > 0 && k.cost.Burst < float64(maxComplexity) {
			return fmt.Errorf("API key %d: %s: cost=%v/%v: the burst %v must be at least --max-complexity (%d), so that every operation allowed can run", i+1, k.name, k.cost.Rate, k.cost.Burst, k.cost.Burst, maxComplexity)
		}
	}
	return nil
}

func parseAPIKey(line string) (apiKey, error) {
	f := strings.Fields(line)
	if len(f) != 3 && len(f) != 4 {
		return apiKey{}, errors.New(`want "name sha256-hex scope[,scope…] [cost=rate/burst]"`)
	}
	var k apiKey
	k.name = f[0]
	h, err := hex.DecodeString(f[1])
	if err != nil || len(h) != sha256.Size {
		return apiKey{}, fmt.Errorf("%s: the key's SHA-256 must be 64 hex digits (printf %%s \"$KEY\" | sha256sum)", k.name)
	}
	copy(k.hash[:], h)
	for _, s := range strings.Split(f[2], ",") {
		if !slices.Contains(Scopes, s) {
			return apiKey{}, fmt.Errorf("%s: unknown scope %q (known: %s)", k.name, s, strings.Join(Scopes, ", "))
		}
		k.scopes = append(k.scopes, s)
	}
	if len(f) == 4 {
		budget, ok := strings.CutPrefix(f[3], "cost=")
		rate, burst, ok2 := strings.Cut(budget, "/")
		var err1, err2 error
		k.cost.Rate, err1 = strconv.ParseFloat(rate, 64)
		k.cost.Burst, err2 = strconv.ParseFloat(burst, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil || k.cost.Rate <= 0 || k.cost.Burst <= 0 {
			return apiKey{}, fmt.Errorf("%s: %q: want cost=rate/burst, its budget of complexity points per second and at once (e.g. cost=50000/200000)", k.name, f[3])
		}
	}
	return k, nil
}

// ReadAPIKeys reads API key lines from a file: one per line, blank lines
// and lines starting with # skipped.
func ReadAPIKeys(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

// Authenticate checks an Authorization header's value.
func (a *Authenticator) Authenticate(authorization string) (*Principal, error) {
	if a.disabled {
		return Anyone, nil
	}
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || token == "" {
		return nil, fmt.Errorf("%w: send Authorization: Bearer <API key or JWT>", errkind.Unauthenticated)
	}
	if strings.Count(token, ".") == 2 && (len(a.jwtKeys) > 0 || a.jwks != nil) {
		return a.verifyJWT(token)
	}
	// Every key is compared, in constant time, so timing tells nothing of
	// which one came close.
	sum := sha256.Sum256([]byte(token))
	var found *apiKey
	for i := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], a.keys[i].hash[:]) == 1 {
			found = &a.keys[i]
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: the token is not a valid API key or JWT", errkind.Unauthenticated)
	}
	return &Principal{Name: found.name, Caller: "key:" + found.name, Cost: found.cost, scopes: found.scopes}, nil
}

// jwtAlgs are the signing algorithms a JWT may use.
var jwtAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// keyFits reports whether key is of the type alg verifies with: RSA for
// RS* and PS*, ECDSA on the matching curve for ES*, Ed25519 for EdDSA.
func keyFits(alg string, key crypto.PublicKey) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return k.Curve == elliptic.P256()
		case "ES384":
			return k.Curve == elliptic.P384()
		case "ES512":
			return k.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// scopeClaim is a scope claim (scope or scp) in either form tokens carry
// it: a space-separated string (RFC 8693; Azure AD's scp) or a JSON list of
// strings (Okta and others).
type scopeClaim []string

var errScopeClaim = errors.New("scope claim must be a string or a list of strings")

func (s *scopeClaim) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return errScopeClaim
	}
	switch v := v.(type) {
	case nil:
		*s = nil
	case string:
		*s = strings.Fields(v)
	case []any:
		out := make(scopeClaim, 0, len(v))
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				return errScopeClaim
			}
			out = append(out, str)
		}
		*s = out
	default:
		return errScopeClaim
	}
	return nil
}

type claims struct {
	jwt.RegisteredClaims
	Scope scopeClaim `json:"scope"`
	Scp   scopeClaim `json:"scp"`
	// Cost is the caller's own budget, {"rate": points/s, "burst": points}.
	Cost *struct {
		Rate  float64 `json:"rate"`
		Burst float64 `json:"burst"`
	} `json:"listgate_cost"`
}

// verifyJWT checks token against the configured keys that fit its alg, in
// one parse: the signature is verified before the claims, so the error
// reported is the most relevant one — a claims error (expired, issuer…)
// from a key that verified the signature, else an invalid signature from
// keys of the token's type, else "no configured key fits alg X" or a
// malformed token; never a key of another type's complaint. Of the JWKS's
// keys only those of the token's kid are tried (all that fit, without one).
func (a *Authenticator) verifyJWT(token string) (*Principal, error) {
	var c claims
	var jwksErr error
	_, err := a.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		keys := a.keysByAlg[alg]
		if a.jwks != nil {
			kid, ok := t.Header["kid"].(string)
			if !ok && t.Header["kid"] != nil {
				return nil, errors.New("the JWT header's kid is not a string")
			}
			var fromJWKS []jwt.VerificationKey
			if fromJWKS, jwksErr = a.jwks.keysFor(alg, kid); jwksErr != nil && len(keys) == 0 {
				return nil, jwksErr
			}
			keys = append(slices.Clip(keys), fromJWKS...)
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("no configured key fits alg %s", alg)
		}
		return jwt.VerificationKeySet{Keys: keys}, nil
	})
	if err != nil {
		if jwksErr != nil && errors.Is(err, jwt.ErrTokenSignatureInvalid) {
			// The PEM keys tried did not verify it; nor could the JWKS.
			err = fmt.Errorf("%w; %w", err, jwksErr)
		}
		return nil, fmt.Errorf("%w: the JWT is not valid: %w", errkind.Unauthenticated, err)
	}
	var known []string
	for _, s := range append(slices.Clone(c.Scope), c.Scp...) {
		if slices.Contains(Scopes, s) && !slices.Contains(known, s) {
			known = append(known, s)
		}
	}
	if c.Subject == "" {
		// Callers are told apart, and bounded, by their subject.
		return nil, fmt.Errorf("%w: the JWT has no sub claim, which names its caller", errkind.Unauthenticated)
	}
	p := &Principal{Name: c.Subject, Caller: "jwt:" + c.Issuer + "/" + c.Subject, scopes: known}
	if c.Cost != nil && c.Cost.Rate > 0 && c.Cost.Burst > 0 {
		p.Cost = CostBudget{c.Cost.Rate, c.Cost.Burst}
	}
	if c.ExpiresAt != nil {
		p.Expires = c.ExpiresAt.Time
	}
	return p, nil
}
