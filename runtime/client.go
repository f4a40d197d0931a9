package runtime

import (
	"context"
	"fmt"
	"sync"
)

// ClientOptions configure a Client; set them with ClientOption functions.
type ClientOptions struct {
	// Variant selects the variant by id or alias; "" selects the default.
	Variant string
	// Device is the requested device ("cpu", "cuda", "cuda:1"); "" means "cuda"
	// with CPU fallback.
	Device string
	// DType is the requested dtype ("auto", "float32", "float16", "bfloat16").
	DType string
	// ManifestDir is the folder relative checkpoint URIs are resolved against first.
	ManifestDir string
	// CheckpointRoot is the folder relative URIs are resolved against next
	// (default: $WORLDFOUNDRY_CHECKPOINT_ROOT).
	CheckpointRoot string
	// CheckpointPath, when set, is used instead of the variant's model checkpoint.
	CheckpointPath string
}

// ClientOption sets one client option.
type ClientOption func(*ClientOptions)

// WithVariant selects a variant by id or alias.
func WithVariant(id string) ClientOption { return func(o *ClientOptions) { o.Variant = id } }

// WithDevice selects the device.
func WithDevice(device string) ClientOption { return func(o *ClientOptions) { o.Device = device } }

// WithDType selects the dtype.
func WithDType(dtype string) ClientOption { return func(o *ClientOptions) { o.DType = dtype } }

// WithManifestDir sets the folder relative checkpoint URIs resolve against first.
func WithManifestDir(dir string) ClientOption { return func(o *ClientOptions) { o.ManifestDir = dir } }

// WithCheckpointRoot sets the checkpoint root folder.
func WithCheckpointRoot(dir string) ClientOption {
	return func(o *ClientOptions) { o.CheckpointRoot = dir }
}

// WithCheckpointPath uses path instead of the variant's model checkpoint.
func WithCheckpointPath(path string) ClientOption {
	return func(o *ClientOptions) { o.CheckpointPath = path }
}

// Client runs the tasks of one model family variant. Generated packages wrap
// it in a typed client. It is safe for concurrent use.
type Client struct {
	spec    *ModelInferenceSpec
	variant *InferenceVariantSpec
	opts    ClientOptions

	mu     sync.Mutex
	closed bool
}

// NewClient returns a client for spec. It resolves the variant now; the
// module is loaded on first use.
func NewClient(spec *ModelInferenceSpec, opts ...ClientOption) (*Client, error) {
	if spec == nil {
		return nil, fmt.Errorf("new client: nil spec")
	}
	var o ClientOptions
	for _, f := range opts {
		f(&o)
	}
	v, err := spec.Variant(o.Variant)
	if err != nil {
		return nil, err
	}
	return &Client{spec: spec, variant: v, opts: o}, nil
}

// Spec returns the client's family spec.
func (c *Client) Spec() *ModelInferenceSpec { return c.spec }

// Variant returns the resolved variant.
func (c *Client) Variant() *InferenceVariantSpec { return c.variant }

// Run runs one task with call and load kwargs (the caller's params split by
// target) and returns the outputs keyed by artifact id.
func (c *Client) Run(ctx context.Context, taskID string, call, load map[string]any) (map[string]any, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%s: %w", c.spec.ModelFamilyID, ErrClosed)
	}
	task, err := c.spec.Task(taskID)
	if err != nil {
		return nil, err
	}
	if _, err := DefaultEngine(); err != nil {
		return nil, fmt.Errorf("%s/%s %s: %w", c.spec.ModelFamilyID, c.variant.VariantID, task.TaskID, err)
	}
	return nil, fmt.Errorf("%s/%s %s: execution through the engine is not wired yet", c.spec.ModelFamilyID, c.variant.VariantID, task.TaskID)
}

// Close releases the client's module. It is safe to call twice.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
