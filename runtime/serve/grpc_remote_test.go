package serve_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/generated/tinyworld"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// grpcRemote is a remote client of a family over the server's gRPC port
// (a grpc:// URL).
func grpcRemote(t testing.TB, s *grpcStarted, name string, opts ...remote.Option) *remote.Client {
	t.Helper()
	rc, err := remote.New(loadSpec(t, name), "grpc://"+s.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	return rc
}

// TestGrpcRemoteEqualsInProcess runs the generated clients over a grpc://
// URL, with and without cross-request batching: one call and a video are
// the in-process client's bit for bit; a batch is the REST remote
// client's bit for bit (and the in-process one's within float32 rounding,
// as over REST); errors, Ready and Metadata answer as over REST; the
// token travels as metadata.
func TestGrpcRemoteEqualsInProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	encIn := inProcess(t, "tiny-encoder")
	worldIn := inProcess(t, "tiny-world")
	for _, batching := range []bool{false, true} {
		s := withGRPC(t, start(t, serve.Config{Batching: batching, BatchDelay: 2 * time.Millisecond, Token: "sesame"}))
		tok := remote.WithToken("sesame")
		encG := grpcRemote(t, s, "tiny-encoder", tok, remote.WithVariant("default"))
		encR := remoteClient(t, s.started, "tiny-encoder", tok, remote.WithVariant("default"))
		worldG := grpcRemote(t, s, "tiny-world", tok)

		for i := range 5 {
			p := tinyencoder.EmbedParams{Tokens: tokens(i, 6+i), Normalize: i%2 == 0}
			var got [2]*tensor.Embedding
			for j, b := range []client.Backend{encIn, encG} {
				r, err := tinyencoder.NewClient(b).Embed(ctx, p)
				if err != nil {
					t.Fatalf("batching %v, backend %d: %v", batching, j, err)
				}
				got[j] = r.Embedding
			}
			if !tensorsEqual(got[0].Vector, got[1].Vector) {
				t.Errorf("batching %v item %d: in-process %v, gRPC %v", batching, i, got[0].Vector, got[1].Vector)
			}
		}

		ps := make([]tinyencoder.EmbedParams, 37)
		for i := range ps {
			ps[i] = tinyencoder.EmbedParams{Tokens: tokens(i, 6), Normalize: true}
		}
		var res [3][]*tinyencoder.EmbedResult
		for j, b := range []client.Backend{encIn, encR, encG} {
			r, err := tinyencoder.NewClient(b).EmbedBatch(ctx, ps)
			if err != nil {
				t.Fatal(err)
			}
			res[j] = r
		}
		for i := range ps {
			if !tensorsEqual(res[1][i].Embedding.Vector, res[2][i].Embedding.Vector) {
				t.Errorf("batching %v batch item %d: REST and gRPC differ", batching, i)
			}
			if d := maxDiff(t, res[0][i].Embedding.Vector, res[2][i].Embedding.Vector); d > 1e-6 {
				t.Errorf("batching %v batch item %d differs from in-process by %g", batching, i, d)
			}
		}

		wp := tinyworld.DefaultGenerateParams()
		wp.Prompt, wp.Seed, wp.NumFrames, wp.Height, wp.Width = "a lighthouse", 7, 13, 16, 48
		var vids [2]*tensor.Video
		for j, b := range []client.Backend{worldIn, worldG} {
			r, err := tinyworld.NewClient(b).Generate(ctx, wp)
			if err != nil {
				t.Fatal(err)
			}
			vids[j] = r.Video
		}
		if !tensorsEqual(vids[0].Frames, vids[1].Frames) || vids[0].FPS != vids[1].FPS {
			t.Errorf("video: in-process %v %v, gRPC %v %v", vids[0].Frames.Shape, vids[0].FPS, vids[1].Frames.Shape, vids[1].FPS)
		}

		_, err := worldG.Run(ctx, "generate", map[string]any{"prompt": "x", "num_frames": int64(10)}, nil)
		var se *remote.StatusError
		if !errors.As(err, &se) || se.Status != 400 || !strings.Contains(err.Error(), "num_frames: must be 4k+1") || !strings.Contains(err.Error(), "tiny-world generate (remote)") {
			t.Errorf("invalid call over gRPC: %v", err)
		}
		if err := worldG.Ready(ctx); err != nil {
			t.Error(err)
		}
		md, err := encG.Metadata(ctx)
		if err != nil || md.Name != "tiny-encoder" || len(md.Inputs) == 0 || md.Parameters["tasks"] == nil {
			t.Errorf("metadata %v %v", md, err)
		}
		if err := grpcRemote(t, s, "tiny-world", tok, remote.WithModelName("nope")).Ready(ctx); !errors.Is(err, spec.ErrUnknownID) {
			t.Errorf("an unknown model: %v", err)
		}
		if err := grpcRemote(t, s, "tiny-world").Ready(ctx); !errors.As(err, &se) || se.Status != 401 {
			t.Errorf("without the token: %v", err)
		}
	}
	if _, err := remote.New(loadSpec(t, "tiny-world"), "grpc://127.0.0.1:1", remote.WithJSONTensors()); err == nil {
		t.Error("WithJSONTensors on a grpc:// URL was taken")
	}
}

// TestGrpcRemoteStreamAppliesControls runs a remote stream over gRPC: the
// controls set after chunk 1 was taken apply from chunk 2, as in-process,
// bit for bit; a refused control is an error and changes nothing.
func TestGrpcRemoteStreamAppliesControls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withGRPC(t, start(t, serve.Config{}))
	worldIn := inProcess(t, "tiny-world")
	worldG := grpcRemote(t, s, "tiny-world")
	const n = 6
	in, err := worldIn.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false), stream.WithMaxChunks(n))
	if err != nil {
		t.Fatal(err)
	}
	want := streamFrames(t, in, ctx, func(i int) {
		if i == 1 {
			in.SetControls(stream.Controls{"forward": 1})
		}
	})
	sess, err := worldG.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false), stream.WithMaxChunks(n))
	if err != nil {
		t.Fatal(err)
	}
	got := streamFrames(t, sess, ctx, func(i int) {
		if i == 1 {
			if err := sess.SetControls(stream.Controls{"forward": 1}); err != nil {
				t.Error(err)
			}
		}
		if i == 2 {
			if err := sess.SetControls(stream.Controls{"jump": 1}); err == nil || !strings.Contains(err.Error(), `unknown control "jump"`) {
				t.Errorf("bad control: %v", err)
			}
		}
	})
	if sess.Controls()["forward"] != 1 {
		t.Errorf("controls after the session: %v", sess.Controls())
	}
	if len(got) != n {
		t.Fatalf("%d chunks, want %d", len(got), n)
	}
	for i := range want {
		if !tensorsEqual(want[i], got[i]) {
			t.Errorf("chunk %d differs from the in-process stream whose controls switched at chunk 2", i)
		}
	}
}

// TestGrpcsRemote serves gRPC over TLS (a certificate made for the test)
// and calls it with a grpcs:// client that trusts it: the answer is the
// in-process one; a client that does not trust it is refused.
func TestGrpcsRemote(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wfserve test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, serve.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.srv.GRPCServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})))
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)

	ctx := context.Background()
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	rc, err := remote.New(loadSpec(t, "tiny-encoder"), "grpcs://"+ln.Addr().String(), remote.WithTLSConfig(&tls.Config{RootCAs: roots}))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	p := tinyencoder.EmbedParams{Tokens: tokens(3, 8)}
	got, err := tinyencoder.NewClient(rc).Embed(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tinyencoder.NewClient(inProcess(t, "tiny-encoder")).Embed(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !tensorsEqual(got.Embedding.Vector, want.Embedding.Vector) {
		t.Error("the grpcs:// answer differs from in-process")
	}
	untrusting, err := remote.New(loadSpec(t, "tiny-encoder"), "grpcs://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	if err := untrusting.Ready(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the certificate: %v", err)
	}
	if _, err := remote.New(loadSpec(t, "tiny-encoder"), "grpc://"+ln.Addr().String(), remote.WithTLSConfig(&tls.Config{})); err == nil {
		t.Error("WithTLSConfig on a grpc:// URL was taken")
	}
}
