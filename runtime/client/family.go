package client

// Family is what every generated Client embeds: the Backend its calls run
// on, and the methods every generated Client has — Backend, Variant (typed
// as the family's Variant, V) and Close. Make one with NewFamily or Open.
type Family[V ~string] struct {
	b Backend
}

// NewFamily returns the Family of a generated Client over b.
func NewFamily[V ~string](b Backend) Family[V] { return Family[V]{b: b} }

// Open returns a generated Client (C) over the backend a constructor
// returned, or its error: the body of a generated New, and a remote
// client's one line, client.Open[pkg.Client](remote.New(pkg.Spec(), url)).
func Open[C ~struct{ Family[V] }, V ~string](b Backend, err error) (*C, error) {
	if err != nil {
		return nil, err
	}
	return &C{NewFamily[V](b)}, nil
}

// Backend returns what runs the client's calls: a *Client (a generated
// New), or the backend given to Open or NewClient (a *remote.Client...);
// nil for a Client that none of them made.
func (f Family[V]) Backend() Backend { return f.b }

// Variant returns the variant the client runs ("" for a Client that no
// constructor made).
func (f Family[V]) Variant() V {
	if isNil(f.b) {
		return ""
	}
	return V(f.b.Variant().VariantID)
}

// Close releases the client's backend (in this process, its hold on the
// model). It is safe to call more than once.
func (f Family[V]) Close() error {
	if isNil(f.b) {
		return nil
	}
	return f.b.Close()
}
