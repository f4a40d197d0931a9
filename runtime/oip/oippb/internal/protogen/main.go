// Command protogen regenerates package oippb's Go files from its .proto
// files: it builds protoc-gen-go and protoc-gen-go-grpc at the versions
// go.mod pins (its tool directives), runs protoc (Debian's
// protobuf-compiler) with them, and writes the output with the protoc
// version line made stable, so that the files do not change with the
// protoc that generated them.
//
//	go run ./internal/protogen [-out DIR]   (in runtime/oip/oippb; go generate runs it)
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// protos are the files of the package, in the order protoc is given them.
var protos = []string{"open_inference_grpc.proto", "wfgen_realtime.proto"}

// goPackage is the Go import path of the generated code.
const goPackage = "github.com/worldfoundry/wfgen/runtime/oip/oippb"

func main() {
	out := flag.String("out", ".", "write the generated files to `DIR`")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintf(os.Stderr, "protogen: %v\n", err)
		os.Exit(1)
	}
}

func run(out string) error {
	if _, err := exec.LookPath("protoc"); err != nil {
		return errors.New("protoc is not installed (Debian: apt-get install protobuf-compiler; scripts/setup.sh installs it)")
	}
	tmp, err := os.MkdirTemp("", "protogen")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bin")
	for _, pkg := range []string{"google.golang.org/protobuf/cmd/protoc-gen-go", "google.golang.org/grpc/cmd/protoc-gen-go-grpc"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, filepath.Base(pkg)), pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s: %w", pkg, err)
		}
	}
	gen := filepath.Join(tmp, "gen")
	if err := os.Mkdir(gen, 0o755); err != nil {
		return err
	}
	var m []string
	for _, p := range protos {
		m = append(m, "M"+p+"="+goPackage+";oippb")
	}
	opts := "paths=source_relative," + strings.Join(m, ",")
	args := []string{"-I.",
		"--plugin=protoc-gen-go=" + filepath.Join(bin, "protoc-gen-go"),
		"--plugin=protoc-gen-go-grpc=" + filepath.Join(bin, "protoc-gen-go-grpc"),
		"--go_out=" + gen, "--go_opt=" + opts,
		"--go-grpc_out=" + gen, "--go-grpc_opt=" + opts,
	}
	cmd := exec.Command("protoc", append(args, protos...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("protoc: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(gen, "*.go"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return errors.New("protoc wrote no Go files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, filepath.Base(f)), Stable(b), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// protocLine is the header line naming the protoc version, in either
// plugin's form ("// \tprotoc        v3.21.12", "// - protoc             v3.21.12").
var protocLine = regexp.MustCompile(`(?m)^(// (?:\t|- )protoc +)v\S+$`)

// Stable replaces the protoc version in a generated file's header with
// "(any)": the code does not depend on it.
func Stable(b []byte) []byte {
	return protocLine.ReplaceAll(b, []byte("${1}(any)"))
}
