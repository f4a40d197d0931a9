package logctx

import (
	"context"
	"log/slog"
)

// Handler is a slog.Handler that adds the correlation fields of each
// record's context (see FromContext) to the record, then passes it to the
// wrapped handler. Fields are added as record attributes in key order, so
// they land inside any group opened with WithGroup, like other record
// attributes.
type Handler struct {
	inner slog.Handler
}

// NewHandler wraps inner so every record carries the correlation fields.
// Wrapping a *Handler again returns it unchanged.
func NewHandler(inner slog.Handler) *Handler {
	if h, ok := inner.(*Handler); ok {
		return h
	}
	return &Handler{inner: inner}
}

// Enabled reports whether the wrapped handler handles records at level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle adds the correlation fields to r and passes it on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if attrs := contextAttrs(ctx); len(attrs) > 0 {
		r = r.Clone()
		r.AddAttrs(attrs...)
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs returns a Handler whose wrapped handler has attrs.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{inner: h.inner.WithAttrs(attrs)}
}

// WithGroup returns a Handler whose wrapped handler opens group name.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name)}
}
