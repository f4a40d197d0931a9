package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// k8sContainer is what TestKubernetesProbes reads of a container in the
// docs' Kubernetes manifests.
type k8sContainer struct {
	Args  []string
	Ports []struct {
		ContainerPort int    `yaml:"containerPort"`
		Name          string `yaml:"name"`
	}
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	StartupProbe   *k8sProbe `yaml:"startupProbe"`

	where string // page:line
}

// probes returns the container's probes by their keys.
func (c *k8sContainer) probes() map[string]*k8sProbe {
	return map[string]*k8sProbe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe, "startupProbe": c.StartupProbe}
}

// k8sProbe is an httpGet or a gRPC probe.
type k8sProbe struct {
	HTTPGet *struct {
		Path string
		Port yaml.Node // a number or a port's name
	} `yaml:"httpGet"`
	GRPC *struct {
		Port    int
		Service string
	} `yaml:"grpc"`
}

var probeKeys = []string{"readinessProbe", "livenessProbe", "startupProbe"}

// modelReady is a REST readiness path that names a model.
var modelReady = regexp.MustCompile(`^/v2/models/[^/]+(/versions/[^/]+)?/ready$`)

// k8sContainers returns the containers with probes of the ```yaml blocks
// of the pages under docs/.
func k8sContainers(t *testing.T) []*k8sContainer {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*k8sContainer
	for _, page := range pages {
		f, err := os.Open(page)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var block strings.Builder
		in, start, n := false, 0, 0
		for sc.Scan() {
			n++
			switch l := sc.Text(); {
			case !in && strings.TrimSpace(l) == "```yaml":
				in, start = true, n
				block.Reset()
			case in && strings.TrimSpace(l) == "```":
				in = false
				if strings.Contains(block.String(), "Probe") {
					out = append(out, blockContainers(t, filepath.Base(page), start, block.String())...)
				}
			case in:
				block.WriteString(l + "\n")
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// blockContainers decodes the YAML documents of a block of page (its
// fence at line start) and returns its containers: every mapping that has
// a probe.
func blockContainers(t *testing.T, page string, start int, text string) []*k8sContainer {
	t.Helper()
	var out []*k8sContainer
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i].Value; k == probeKeys[0] || k == probeKeys[1] || k == probeKeys[2] {
					c := &k8sContainer{where: fmt.Sprintf("%s:%d", page, start+n.Line)}
					if err := n.Decode(c); err != nil {
						t.Fatalf("%s: %v", c.where, err)
					}
					out = append(out, c)
					return
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s:%d: %v", page, start, err)
		}
		walk(&doc)
	}
	return out
}

// demoRepository makes a model repository of the demo families, each in
// its folder with its manifest and checkpoint.
func demoRepository(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "models")
	for _, name := range []string{"tiny-encoder", "tiny-world"} {
		text, err := os.ReadFile(filepath.Join("..", "..", "manifests", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, name, "checkpoints"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name, name+".yaml"), []byte(strings.Replace(string(text), "$schema=../schema/", "$schema=../../schema/", 1)))
		replaceFile(t, tiny.Path(t, filepath.Join("checkpoints", name+".pt")), filepath.Join(dir, name, "checkpoints", name+".pt"))
	}
	return dir
}

// portOf returns the port of a listen address (":8080" is 8080).
func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// The Kubernetes manifests of the docs use readiness per model, and work:
// each container's args are wfserve's flags; each readiness probe names a
// model (GET /v2/models/NAME/ready or the gRPC health service NAME); each
// probe's port is the one the args serve it on (-addr for httpGet,
// -grpc-addr for grpc, by number or by the container port's name); and
// wfserve started with the container's args — its paths mapped to the
// test's (the repository to the demo families', the token file to one of
// the test's) and its ports to loopback ones — answers every probe path
// 200 and every health service SERVING, without a token.
func TestKubernetesProbes(t *testing.T) {
	t.Parallel()
	containers := k8sContainers(t)
	repositories := 0
	for _, c := range containers {
		fs, _ := flags(io.Discard)
		if err := fs.Parse(c.Args); err != nil {
			t.Errorf("%s: args %q: %v", c.where, c.Args, err)
			continue
		}
		httpPort, grpcPort := portOf(fs.Lookup("addr").Value.String()), -1
		if a := fs.Lookup("grpc-addr").Value.String(); a != "" {
			grpcPort = portOf(a)
		}
		port := func(n yaml.Node) int {
			if p, err := strconv.Atoi(n.Value); err == nil {
				return p
			}
			for _, p := range c.Ports {
				if p.Name == n.Value {
					return p.ContainerPort
				}
			}
			return -1
		}
		for _, k := range probeKeys {
			p := c.probes()[k]
			switch {
			case p == nil:
			case p.HTTPGet != nil:
				if port(p.HTTPGet.Port) != httpPort {
					t.Errorf("%s: %s's port %s is not -addr's %d", c.where, k, p.HTTPGet.Port.Value, httpPort)
				}
				if k == "readinessProbe" && !modelReady.MatchString(p.HTTPGet.Path) {
					t.Errorf("%s: readiness %s names no model (want /v2/models/NAME/ready)", c.where, p.HTTPGet.Path)
				}
			case p.GRPC != nil:
				if p.GRPC.Port != grpcPort {
					t.Errorf("%s: %s's port %d is not -grpc-addr's (%d: -1 is none)", c.where, k, p.GRPC.Port, grpcPort)
				}
				if k == "readinessProbe" && p.GRPC.Service == "" {
					t.Errorf("%s: readiness names no model (the gRPC probe's service: the model's name)", c.where)
				}
			default:
				t.Errorf("%s: %s is neither httpGet nor grpc", c.where, k)
			}
		}

		// wfserve with the container's args.
		var args []string
		fs.Visit(func(f *flag.Flag) {
			v := f.Value.String()
			switch f.Name {
			case "addr", "addr-file", "device":
				return // startRepository's
			case "grpc-addr":
				v = "127.0.0.1:0"
			case "repository":
				v = demoRepository(t)
				repositories++
			case "checkpoint-root":
				v = tiny.Dir(t)
			case "token-file":
				v = filepath.Join(t.TempDir(), "token")
				writeFile(t, v, []byte("sesame\n"))
			}
			args = append(args, "-"+f.Name+"="+v)
		})
		for _, m := range fs.Args() {
			args = append(args, filepath.Join("..", "..", "manifests", filepath.Base(m)))
		}
		p := startRepository(t, args...)
		for _, k := range probeKeys {
			switch pr := c.probes()[k]; {
			case pr == nil:
			case pr.HTTPGet != nil:
				resp, err := http.Get(p.url + pr.HTTPGet.Path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("%s: %s GET %s: %d %s", c.where, k, pr.HTTPGet.Path, resp.StatusCode, body)
				}
			case pr.GRPC != nil && p.grpcAddr != "":
				conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				st, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: pr.GRPC.Service})
				conn.Close()
				if err != nil || st.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					t.Errorf("%s: %s gRPC health %q: %v %v", c.where, k, pr.GRPC.Service, st.GetStatus(), err)
				}
			}
		}
		p.stop(t)
	}
	if len(containers) == 0 || repositories == 0 {
		t.Errorf("the docs have %d containers with probes, %d of them with -repository: want both", len(containers), repositories)
	}
}
