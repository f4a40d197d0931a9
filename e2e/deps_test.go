package e2e_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository's root folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// A program that imports one generated family and the engine links no
// network package — no gRPC, OpenTelemetry, WebSocket or HTTP/2 — since a
// generated package holds the in-process client only (every family
// imported runtime/remote: 373 packages, against 138 without).
func TestGeneratedFamilyLinksNoNetwork(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "github.com/worldfoundry/wfgen/generated/tinyencoder", "github.com/worldfoundry/wfgen/runtime/torch")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, network := range []string{"google.golang.org/grpc", "go.opentelemetry.io/", "github.com/coder/websocket", "golang.org/x/net/http2", "github.com/worldfoundry/wfgen/runtime/remote", "github.com/worldfoundry/wfgen/runtime/serve"} {
			if strings.HasPrefix(d, network) {
				t.Errorf("a program of a generated family and the engine imports %s", d)
			}
		}
	}
	t.Logf("%d packages", len(deps))
}
