// Package remote runs a family's tasks on a server that speaks the Open
// Inference Protocol (KServe v2) REST API or, for a grpc:// or grpcs://
// URL, its gRPC API, such as cmd/wfserve, and returns their outputs in
// exactly the form the in-process runtime/client returns: a Client is a
// client.Backend, so a generated Client over it
// (client.Open[pkg.Client](remote.New(pkg.Spec(), url))) is the same type,
// with the same methods, as one made by New.
//
// The mapping of fields and artifacts onto named tensors is package oip's.
// Any OIP server that serves a model with the family's inputs works for Run
// and RunBatch; streams use wfserve's session extension: one WebSocket
// over REST, one bidirectional RPC over gRPC (see docs/serving.md).
package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Option configures a Client.
type Option func(*Client) error

// WithVariant selects the variant (id or alias) the requests run; without
// it the server runs the family's default variant.
func WithVariant(id string) Option {
	return func(c *Client) error { c.variant = id; return nil }
}

// WithToken sends the bearer token with every request.
func WithToken(token string) Option {
	return func(c *Client) error { c.token = token; return nil }
}

// WithHTTPClient sends requests with hc instead of http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("remote: nil http client")
		}
		c.http = hc
		return nil
	}
}

// WithModelName names the model on the server, when it is not the family id.
func WithModelName(name string) Option {
	return func(c *Client) error {
		if name == "" {
			return errors.New("remote: empty model name")
		}
		c.model = name
		return nil
	}
}

// WithJSONTensors sends tensor inputs and asks for outputs as JSON
// numbers, for a server without the binary tensor data extension
// (oip.BinaryExtension). By default tensor, image and video inputs travel
// as binary data, and every output is asked for binary: the results are
// the same bit for bit, the bodies several times smaller.
func WithJSONTensors() Option {
	return func(c *Client) error { c.asJSON = true; return nil }
}

// Client runs the tasks of one family on an OIP server. It is safe for
// concurrent use.
type Client struct {
	spec    *spec.ModelInferenceSpec
	base    *url.URL
	model   string
	variant string                     // the id requests name; "" for the server's default
	vspec   *spec.InferenceVariantSpec // the variant, the family's default when none is named
	token   string
	http    *http.Client
	tracer  trace.Tracer // WithTracerProvider, else the global provider's
	asJSON  bool         // WithJSONTensors
	retries int          // WithRetries
	resume  int          // WithResume: a snapshot every resume chunks (0: sessions are not resumed)
	tlsCfg  *tls.Config  // WithTLSConfig (grpcs://)
	t       transport    // REST (rest.go) or gRPC (grpc.go), by the URL's scheme
}

var (
	_ client.Backend  = (*Client)(nil)
	_ client.Restorer = (*Client)(nil)
)

// New returns a client of the family spec served at baseURL: the server's
// REST root ("http://host:8080", "https://...") or its gRPC address
// ("grpc://host:8081", plaintext; "grpcs://host:8081", TLS), which picks
// the transport. The calls, their answers and errors are the same over
// either. Nothing is sent until the first call; Close closes a gRPC
// connection.
func New(spec *spec.ModelInferenceSpec, baseURL string, opts ...Option) (*Client, error) {
	if spec == nil {
		return nil, errors.New("remote: nil spec")
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("remote: base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "grpc" && u.Scheme != "grpcs" || u.Host == "" {
		return nil, fmt.Errorf("remote: base URL %q: want http://, https://, grpc:// or grpcs:// and a host", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{spec: spec, base: u, model: spec.ModelFamilyID, http: http.DefaultClient, tracer: globalTracer}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	v, err := spec.Variant(c.variant)
	if err != nil {
		return nil, err
	}
	if c.variant != "" {
		c.variant = v.VariantID
	}
	c.vspec = v
	if c.tlsCfg != nil && u.Scheme != "grpcs" {
		return nil, errNotTLS
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		c.t = &restTransport{c: c, ws: &wsPool{}}
		return c, nil
	}
	if c.asJSON || c.http != http.DefaultClient {
		return nil, errNotGRPC
	}
	if c.t, err = dialGRPC(c); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	return c, nil
}

// Spec returns the client's family spec.
func (c *Client) Spec() *spec.ModelInferenceSpec { return c.spec }

// Variant returns the variant the requests run: the one WithVariant named,
// else the family's default, which a server runs when a request names
// none.
func (c *Client) Variant() *spec.InferenceVariantSpec { return c.vspec }

// Close closes the gRPC connection of a grpc:// client, and the
// WebSockets a REST client keeps for its next realtime sessions.
func (c *Client) Close() error { return c.t.close() }

// StatusError is an error answer of the server: its HTTP status and the
// protocol error body's message. errors.Is matches context.DeadlineExceeded
// for 504 and spec.ErrUnknownID for 404.
type StatusError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the "error" member of the body (or the body's start).
	Message string
}

// Error names the status and the message.
func (e *StatusError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Is matches the sentinel errors the status stands for.
func (e *StatusError) Is(target error) bool {
	switch e.Status {
	case http.StatusGatewayTimeout:
		return target == context.DeadlineExceeded
	case http.StatusNotFound:
		return target == spec.ErrUnknownID
	}
	return false
}

// where prefixes errors like runtime/client does.
func (c *Client) where(task string) string {
	w := c.spec.ModelFamilyID
	if c.variant != "" {
		w += "/" + c.variant
	}
	if task != "" {
		w += " " + task
	}
	return w + " (remote)"
}

// Call runs one call of task (a task of Spec) with the one item of in on
// the server and returns the outputs keyed by artifact id, as
// client.Client.Call does: tensors as *tensor.Tensor, text and json
// artifacts as strings, tensor_list artifacts as []*tensor.Tensor
// (oip.DecodeResponse reassembles them from their elements). Errors name the family, variant and task; the
// server's answer is a *StatusError.
//
// Per-call options are for in-process memory (client.WithOutputBuffer) and
// have no effect on a request.
func (c *Client) Call(ctx context.Context, task *spec.InferenceTaskProfile, in client.Inputs, _ ...client.CallOption) (map[string]any, error) {
	if err := client.OneItem(in); err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	out, err := c.run(ctx, task, client.CallKwargs(task, in, 0), client.LoadKwargs(task, in, 0))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	return out, nil
}

// Run runs task taskID with untyped call and load kwargs keyed by field id:
// Call with them as Inputs (client.KwargsOf).
func (c *Client) Run(ctx context.Context, taskID string, call, load map[string]any, opts ...client.CallOption) (map[string]any, error) {
	task, in, err := c.kwargsInputs(ctx, taskID, []map[string]any{call}, load)
	if err != nil {
		return nil, err
	}
	return c.Call(ctx, task, in, opts...)
}

// kwargsInputs resolves a task by id and returns untyped kwargs as its
// Inputs, for Run, RunBatch and Stream.
func (c *Client) kwargsInputs(ctx context.Context, taskID string, items []map[string]any, load map[string]any) (*spec.InferenceTaskProfile, client.Inputs, error) {
	task, err := c.spec.Task(taskID)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.where(""), err)
	}
	in, err := client.KwargsOf(ctx, task, items, load)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	return task, in, nil
}

func (c *Client) run(ctx context.Context, task *spec.InferenceTaskProfile, call, load map[string]any) (map[string]any, error) {
	req, err := c.t.request(task, call, load)
	if err != nil {
		return nil, err
	}
	resp, err := c.t.Infer(ctx, req)
	if err != nil {
		return nil, err
	}
	return oip.DecodeResponse(task, resp)
}

// Metadata returns the server's metadata of the model.
func (c *Client) Metadata(ctx context.Context) (*oip.ModelMetadata, error) {
	md, err := c.t.metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(""), err)
	}
	return md, nil
}

// Ready returns nil when the server reports the model (variant) ready.
func (c *Client) Ready(ctx context.Context) error {
	if err := c.t.ready(ctx); err != nil {
		return fmt.Errorf("%s: %w", c.where(""), err)
	}
	return nil
}
