package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/listgate/listgate/errkind"
)

// jwksPolicy says how often and how far a JWKS is fetched.
type jwksPolicy struct {
	// Refresh is how often the keys are fetched again. Identity providers
	// publish a new key well before they sign with it, and a token that
	// names a key not yet seen fetches the set at once, so the hourly
	// fetch is mostly for keys withdrawn from the set: they stop
	// verifying within the hour.
	Refresh time.Duration
	// MinInterval is the least time between two fetches made because a
	// token named an unknown key, and between retries after a failed
	// fetch. Anyone can send tokens with made-up key ids: at most one fetch
	// a minute per gateway keeps such a flood off the identity provider
	// (Okta and Auth0 rate-limit their key endpoints), while a genuinely
	// new key is fetched by the first token that carries it.
	MinInterval time.Duration
	// Timeout bounds one fetch. A fetch that a token's unknown key causes
	// holds up that request, so it is well under the request timeout.
	Timeout time.Duration
	// MaxBytes bounds the JWKS read: a few keys, even with their
	// certificate chains, take tens of KB.
	MaxBytes int64
}

var defaultJWKSPolicy = jwksPolicy{Refresh: time.Hour, MinInterval: time.Minute, Timeout: 5 * time.Second, MaxBytes: 1 << 20}

// jwks holds the signing keys an identity provider publishes at a JWKS
// URL, fetched at start, every Refresh, and when a token names a key it
// does not hold (at most once per MinInterval). A failed fetch keeps the
// keys fetched before.
type jwks struct {
	url    string
	named  string // url with its password masked: what logs and errors show
	client *http.Client
	log    *slog.Logger
	policy jwksPolicy
	now    func() time.Time

	keys atomic.Pointer[[]jwksKey] // nil until a fetch succeeds

	mu           sync.Mutex
	running      *jwksFetch // the fetch under way, which others wait for
	lastOnDemand time.Time  // when a token's unknown key last caused a fetch
	lastErr      error      // of the last fetch
}

type jwksFetch struct {
	done chan struct{}
	err  error
}

// jwksKey is a usable key of the set: asymmetric and for signatures.
type jwksKey struct {
	kid string
	alg string // empty: any alg the key fits
	key crypto.PublicKey
}

// errJWKSRateLimited is why an unknown key did not cause a fetch.
var errJWKSRateLimited = errors.New("JWKS fetch rate-limited")

func newJWKS(rawURL string, log *slog.Logger, policy jwksPolicy) (*jwks, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http or https URL", rawURL)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &jwks{
		url:    rawURL,
		named:  u.Redacted(),
		client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		log:    log,
		policy: policy,
		now:    time.Now,
	}, nil
}

// start fetches the keys once. A gateway whose identity provider is
// briefly unreachable still starts, serving API keys and PEM-verified JWTs;
// it refuses JWKS-verified tokens, saying why, until a fetch succeeds.
func (j *jwks) start() {
	if u, _ := url.Parse(j.url); u.Scheme == "http" && !isLoopback(u.Hostname()) {
		j.log.Warn("the JWKS is fetched over plain HTTP: anyone on the way can replace its keys and sign tokens; use https", "url", j.named)
	}
	if err := j.refresh(false); err != nil {
		j.log.Error("JWTs signed by the JWKS's keys are refused until it loads; retrying", "retry_every", j.policy.MinInterval, "err", err)
	}
}

// run fetches the keys again every Refresh (every MinInterval while the
// last fetch failed) until ctx ends.
func (j *jwks) run(ctx context.Context) {
	for {
		wait := j.policy.Refresh
		if j.lastError() != nil {
			wait = j.policy.MinInterval
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		failedBefore := j.lastError() != nil
		switch err := j.refresh(false); {
		case err != nil && j.keys.Load() != nil:
			j.log.Warn("JWKS refresh failed; keeping the keys fetched before", "err", err)
		case err != nil:
			j.log.Error("JWTs signed by the JWKS's keys are still refused", "err", err)
		case failedBefore:
			j.log.Info("JWKS loaded", "url", j.named, "keys", len(*j.keys.Load()))
		}
	}
}

func (j *jwks) lastError() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lastErr
}

// refresh fetches the keys, or waits for the fetch under way. A fetch
// onDemand (a token named an unknown key) is refused with
// errJWKSRateLimited within MinInterval of the last such one.
func (j *jwks) refresh(onDemand bool) error {
	j.mu.Lock()
	if f := j.running; f != nil {
		j.mu.Unlock()
		<-f.done
		return f.err
	}
	if onDemand {
		now := j.now()
		if !j.lastOnDemand.IsZero() && now.Sub(j.lastOnDemand) < j.policy.MinInterval {
			j.mu.Unlock()
			return errJWKSRateLimited
		}
		j.lastOnDemand = now
	}
	f := &jwksFetch{done: make(chan struct{})}
	j.running = f
	j.mu.Unlock()

	f.err = j.fetch()
	j.mu.Lock()
	j.running, j.lastErr = nil, f.err
	j.mu.Unlock()
	close(f.done)
	return f.err
}

// fetch reads the set and, if it holds a usable key, replaces the keys.
func (j *jwks) fetch() error {
	ctx, cancel := context.WithTimeout(context.Background(), j.policy.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return fmt.Errorf("the JWKS at %s: %w", j.named, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := j.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // without the method and URL said already
		}
		return fmt.Errorf("the JWKS at %s did not answer: %w", j.named, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the JWKS at %s answered HTTP %d, not 200", j.named, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, j.policy.MaxBytes+1))
	if err != nil {
		return fmt.Errorf("the JWKS at %s did not answer: %w", j.named, err)
	}
	if int64(len(body)) > j.policy.MaxBytes {
		return fmt.Errorf("the JWKS at %s is larger than %d bytes", j.named, j.policy.MaxBytes)
	}
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("the JWKS at %s is not a JWK set: %w", j.named, err)
	}
	keys := usableKeys(set)
	if len(keys) == 0 {
		return fmt.Errorf("the JWKS at %s has no RSA, ECDSA (P-256, P-384, P-521) or Ed25519 signing key among its %d keys", j.named, len(set.Keys))
	}
	j.keys.Store(&keys)
	return nil
}

// usableKeys are the keys of set that can verify a JWT signature. The
// others (symmetric, encryption-only, of an unsupported type, malformed)
// are left out: none can verify anything, and one of them must not make a
// provider's whole set unusable.
func usableKeys(set jwkset.JWKSMarshal) []jwksKey {
	var out []jwksKey
	for _, m := range set.Keys {
		if m.USE != "" && m.USE != jwkset.UseSig {
			continue
		}
		if len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify) {
			continue
		}
		// Private material, if a set wrongly carries any, is not read; a
		// symmetric key is refused for want of it.
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			continue
		}
		switch k.Key().(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
			out = append(out, jwksKey{kid: m.KID, alg: m.ALG.String(), key: k.Key()})
		}
	}
	return out
}

// keysFor returns the keys that may have signed a token of alg whose
// header names kid (or no kid). A kid the set lacks, or a set not loaded
// yet, fetches it again first (rate-limited).
func (j *jwks) keysFor(alg, kid string) ([]jwt.VerificationKey, error) {
	loaded := j.keys.Load()
	if loaded == nil || (kid != "" && !hasKid(*loaded, kid)) {
		err := j.refresh(true)
		rateLimited := errors.Is(err, errJWKSRateLimited)
		// Why a fetch failed goes to the log, not to the caller: it can
		// name hosts and addresses of the network the gateway is on.
		if err != nil && !rateLimited {
			j.log.Warn("JWKS fetch for a token's key failed", "kid", kid, "err", err)
		}
		switch loaded = j.keys.Load(); {
		case loaded == nil && rateLimited:
			return nil, fmt.Errorf("the identity provider's keys (--jwt-jwks-url) have not loaded yet, and are fetched again at most every %v; the gateway's log says why", j.policy.MinInterval)
		case loaded == nil:
			return nil, errors.New("the identity provider's keys (--jwt-jwks-url) could not be fetched; the gateway's log says why")
		case kid != "" && !hasKid(*loaded, kid) && rateLimited:
			return nil, fmt.Errorf("the identity provider's key set (--jwt-jwks-url) has no key %s (a token with an unknown key fetches it again at most every %v)", errkind.Quote(kid), j.policy.MinInterval)
		case kid != "" && !hasKid(*loaded, kid) && err != nil:
			return nil, fmt.Errorf("no key %s among the identity provider's keys fetched before, and fetching them again failed; the gateway's log says why", errkind.Quote(kid))
		}
	}
	var out []jwt.VerificationKey
	for _, k := range *loaded {
		if (kid == "" || k.kid == kid) && (k.alg == "" || k.alg == alg) && keyFits(alg, k.key) {
			out = append(out, k.key)
		}
	}
	switch {
	case len(out) > 0:
		return out, nil
	case kid == "":
		return nil, fmt.Errorf("the identity provider's key set (--jwt-jwks-url) has no key that fits alg %s", alg)
	case hasKid(*loaded, kid):
		return nil, fmt.Errorf("the JWKS's key %s does not fit alg %s", errkind.Quote(kid), alg)
	default:
		return nil, fmt.Errorf("the identity provider's key set (--jwt-jwks-url) has no key %s", errkind.Quote(kid))
	}
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

func hasKid(keys []jwksKey, kid string) bool {
	return slices.ContainsFunc(keys, func(k jwksKey) bool { return k.kid == kid })
}
