package guards

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/listgate/listgate/errkind"
)

// documentLimits bounds what one new document may cost before gqlgen
// parses and validates it: validation is superlinear in the fields of a
// selection (5,000 aliases of one field took 4.6 s, 10,000 took 22 s), and
// fragment spreads multiply fields. A document is parsed with a token
// limit and refused when its fields, with every fragment spread expanded,
// pass --max-fields. Documents already in the query cache passed before
// and are not checked again.
type documentLimits struct {
	maxTokens int
	maxFields int
	cache     *Cache[*ast.QueryDocument]
}

// DocumentLimits is the guard of --max-tokens and --max-fields; documents
// is the parsed-query cache the executor keeps.
func DocumentLimits(maxTokens, maxFields int, documents *Cache[*ast.QueryDocument]) graphql.HandlerExtension {
	return documentLimits{maxTokens: maxTokens, maxFields: maxFields, cache: documents}
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = documentLimits{}

func (documentLimits) ExtensionName() string                   { return "DocumentLimits" }
func (documentLimits) Validate(graphql.ExecutableSchema) error { return nil }

func (d documentLimits) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if p.Query == "" {
		return nil
	}
	doc, cached := d.cache.Get(ctx, p.Query)
	if !cached {
		var err error
		doc, err = parser.ParseQueryWithTokenLimit(&ast.Source{Input: p.Query}, d.maxTokens)
		if err != nil {
			if e, ok := err.(*gqlerror.Error); ok && e.Message == fmt.Sprintf("exceeded token limit of %d", d.maxTokens) {
				return gqlerror.WrapPath(nil, fmt.Errorf("%w query: more than %d tokens (--max-tokens)", errkind.Invalid, d.maxTokens))
			}
			return nil // gqlgen's own parse reports it, with its position
		}
		if n := expandedFields(doc, d.maxFields); n > d.maxFields {
			return gqlerror.WrapPath(nil, fmt.Errorf("%w query: more than %d fields once its fragments are expanded (--max-fields)", errkind.Invalid, d.maxFields))
		}
	}
	return numberVariables(doc, p)
}

// numberVariables refuses, quoting it, a number sent for an Int variable
// that is not an integer (1.0), or for a Float one that no float64 holds
// (1e400): gqlparser refuses them too, but names a value never sent.
func numberVariables(doc *ast.QueryDocument, p *graphql.RawParams) *gqlerror.Error {
	op := doc.Operations.ForName(p.OperationName)
	if op == nil {
		return nil
	}
	for _, v := range op.VariableDefinitions {
		n, ok := p.Variables[v.Variable].(json.Number)
		if !ok || v.Type.Elem != nil {
			continue
		}
		switch v.Type.NamedType {
		case "Int":
			if _, err := n.Int64(); err != nil {
				return gqlerror.WrapPath(ast.Path{ast.PathName("variable"), ast.PathName(v.Variable)}, fmt.Errorf("%w Int %s: not an integer; send a number without fraction or exponent", errkind.Invalid, errkind.Clip(string(n))))
			}
		case "Float":
			if _, err := n.Float64(); err != nil {
				return gqlerror.WrapPath(ast.Path{ast.PathName("variable"), ast.PathName(v.Variable)}, fmt.Errorf("%w Float %s: no 64-bit float holds it", errkind.Invalid, errkind.Clip(string(n))))
			}
		}
	}
	return nil
}

// expandedFields counts the fields of a document's operations as they
// would run, every fragment spread counted as the fields it brings. Each
// fragment is counted once (memoized) and the count stops past limit, so
// the walk is linear in the document whatever its fragments multiply to.
// Spreads of unknown or cyclic fragments count nothing: validation
// refuses them.
func expandedFields(doc *ast.QueryDocument, limit int) int {
	memo := map[string]int{}
	const visiting = -1
	var count func(set ast.SelectionSet, nesting int) int
	count = func(set ast.SelectionSet, nesting int) int {
		if nesting > limit {
			return limit + 1 // nesting alone past the limit: refuse
		}
		n := 0
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				n += 1 + count(s.SelectionSet, nesting+1)
			case *ast.InlineFragment:
				n += count(s.SelectionSet, nesting+1)
			case *ast.FragmentSpread:
				c, seen := memo[s.Name]
				if !seen {
					f := doc.Fragments.ForName(s.Name)
					if f == nil {
						continue
					}
					memo[s.Name] = visiting
					c = count(f.SelectionSet, nesting+1)
					memo[s.Name] = c
				}
				if c > 0 {
					n += c
				}
			}
			if n > limit {
				return limit + 1
			}
		}
		return n
	}
	total := 0
	for _, op := range doc.Operations {
		total += count(op.SelectionSet, 0)
		if total > limit {
			return limit + 1
		}
	}
	return total
}

// LRU is an LRU cache bounded in bytes as well as in entries: the
// parsed-query cache, the automatic persisted queries (Cache) and the
// plans of compiled documents. cost estimates the bytes an entry holds;
// an entry over maxEntry is not kept.
type LRU[K comparable, T any] struct {
	mu       sync.Mutex // guards lru and bytes
	lru      *simplelru.LRU[K, T]
	cost     func(key K, value T) int
	bytes    int
	max      int
	maxEntry int
}

// NewLRU returns an LRU of at most maxBytes, each entry of at most
// maxEntry, as cost counts them.
func NewLRU[K comparable, T any](maxBytes, maxEntry int, cost func(K, T) int) *LRU[K, T] {
	c := &LRU[K, T]{cost: cost, max: maxBytes, maxEntry: maxEntry}
	c.lru, _ = simplelru.NewLRU(1<<20, func(k K, v T) { c.bytes -= c.cost(k, v) })
	return c
}

func (c *LRU[K, T]) Get(key K) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(key)
}

// Add keeps value, unless key has one already or it costs too much.
func (c *LRU[K, T]) Add(key K, value T) {
	cost := c.cost(key, value)
	if cost > c.maxEntry {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(key) {
		return
	}
	c.lru.Add(key, value)
	c.bytes += cost
	for c.bytes > c.max {
		c.lru.RemoveOldest()
	}
}

// Cache is an LRU of texts, as gqlgen's caches take them.
type Cache[T any] struct{ *LRU[string, T] }

// NewDocumentCache keeps parsed documents. A document's cost is taken as
// AstBytesPerByte times its text: gqlparser's AST of a literal-heavy query
// is about that much larger than the query (ten 480 KB documents of list
// literals held 730 MB). Documents over 64 KB of text are parsed for each
// request instead.
func NewDocumentCache(maxBytes int) *Cache[*ast.QueryDocument] {
	return &Cache[*ast.QueryDocument]{NewLRU(maxBytes, 64<<10*AstBytesPerByte, func(q string, _ *ast.QueryDocument) int { return AstBytesPerByte * len(q) })}
}

// AstBytesPerByte is what a parsed document is taken to hold per byte of
// its text.
const AstBytesPerByte = 160

// NewAPQCache keeps the texts of automatic persisted queries.
func NewAPQCache(maxBytes int) *Cache[string] {
	return &Cache[string]{NewLRU(maxBytes, maxBytes/16, func(hash, q string) int { return len(hash) + len(q) })}
}

var (
	_ graphql.Cache[*ast.QueryDocument] = (*Cache[*ast.QueryDocument])(nil)
	_ graphql.Cache[string]             = (*Cache[string])(nil)
)

func (c *Cache[T]) Get(_ context.Context, key string) (T, bool) { return c.LRU.Get(key) }

func (c *Cache[T]) Add(_ context.Context, key string, value T) { c.LRU.Add(key, value) }
