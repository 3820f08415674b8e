package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// The deployment files (Dockerfile, deploy/) are checked here against
// the flags and the config the broker command accepts; the container
// test builds and runs the image where a container engine works.

const repoRoot = "../.."

// containerConfig is the image's config file, as the tests reach it.
var containerConfig = filepath.Join(repoRoot, "deploy", "container.yaml")

// dockerfileArgs returns the JSON array of the Dockerfile instruction
// named (CMD, ENTRYPOINT, HEALTHCHECK's CMD) in the final stage.
func dockerfileArgs(t *testing.T, text, instr string) []string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + instr + `\s+(?:--\S+\s+(?:\\\n\s*)?)*(?:CMD\s+)?(\[.*\])\s*$`)
	ms := re.FindAllStringSubmatch(text, -1)
	if len(ms) == 0 {
		t.Fatalf("the Dockerfile has no %s in exec form", instr)
	}
	var args []string
	if err := json.Unmarshal([]byte(ms[len(ms)-1][1]), &args); err != nil {
		t.Fatalf("%s: %v", instr, err)
	}
	return args
}

// TestDockerfile checks that the image runs the broker as a non-root user
// from a static build of go.mod's Go version, and that its command and
// health check are ones the broker accepts.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(mod))
	if goVersion == nil || !strings.Contains(text, "ARG GO_VERSION="+goVersion[1]+"\n") {
		t.Errorf("the Dockerfile does not build with go.mod's Go version %v", goVersion)
	}
	// go mod download, run before the sources are copied, needs the
	// go.mod of every module go.mod replaces with a directory.
	download := strings.Index(text, "RUN go mod download")
	for _, m := range regexp.MustCompile(`(?m)^replace \S+ => \./(\S+)$`).FindAllStringSubmatch(string(mod), -1) {
		step := "COPY " + m[1] + "/go.mod " + m[1] + "/\n"
		if i := strings.Index(text, step); i < 0 || download < 0 || i > download {
			t.Errorf("the Dockerfile does not copy %s/go.mod before go mod download", m[1])
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "USER 65532:65532", "VOLUME /data", "COPY deploy/container.yaml /etc/rmq/broker.yaml"} {
		if !strings.Contains(text, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}

	entry := dockerfileArgs(t, text, "ENTRYPOINT")
	cmd := dockerfileArgs(t, text, "CMD")
	if len(entry) != 1 || entry[0] != "/usr/local/bin/broker" {
		t.Fatalf("ENTRYPOINT %q", entry)
	}
	args := replaceArg(cmd, "/etc/rmq/broker.yaml", containerConfig)
	cfg, _, code := brokerConfig(args, io.Discard)
	if code >= 0 {
		t.Fatalf("the image's command %q: exit %d", cmd, code)
	}
	if cfg.DataDir != "/data" || cfg.HTTPListen != "0.0.0.0:8080" {
		t.Fatalf("the image's config: dataDir %q, httpListen %q", cfg.DataDir, cfg.HTTPListen)
	}
	// Without --insecure or acl:, the only refusal is the documented one.
	if err := cfg.Check(); !errors.Is(err, server.ErrInsecure) || len(unjoined(err)) != 1 {
		t.Fatalf("the image's config checks as %v, want the refusal to expose it (ErrInsecure) alone", err)
	}
	cfg, _, _ = brokerConfig(append(args, "--insecure"), io.Discard)
	if err := cfg.Check(); err != nil {
		t.Fatalf("the image's config with --insecure: %v", err)
	}

	health := dockerfileArgs(t, text, "HEALTHCHECK")
	if len(health) < 2 || health[0] != "/usr/local/bin/broker" || health[1] != "healthcheck" || !strings.Contains(strings.Join(health, " "), "/readyz") {
		t.Fatalf("HEALTHCHECK %q", health)
	}
	// The health check asks the HTTP port the image's config opens.
	if !strings.Contains(strings.Join(health, " "), "127.0.0.1:"+portOf(t, cfg.HTTPListen)) {
		t.Fatalf("HEALTHCHECK %q does not ask the HTTP port %s", health, cfg.HTTPListen)
	}
}

func unjoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func replaceArg(args []string, from, to string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, from, to)
	}
	return out
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestComposeFile reads deploy/compose.yaml and checks each service's
// command against the broker's flags and config checks, and that the
// set's members agree with each other and with the ports they publish.
func TestComposeFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image    string   `yaml:"image"`
			Hostname string   `yaml:"hostname"`
			Command  []string `yaml:"command"`
			Ports    []string `yaml:"ports"`
			Volumes  []string `yaml:"volumes"`
			Build    *struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatal(err)
	}
	ns, ok := compose.Services["namesrv"]
	if !ok || ns.Build == nil || filepath.Join("deploy", ns.Build.Context, ns.Build.Dockerfile) != "Dockerfile" {
		t.Fatalf("the name server service does not build the Dockerfile at the root: %+v", ns.Build)
	}
	nsCfg, code := namesrvConfig(replaceArg(ns.Command[1:], "/etc/rmq/broker.yaml", containerConfig), io.Discard)
	if ns.Command[0] != "namesrv" || code >= 0 {
		t.Fatalf("the name server's command %q: exit %d", ns.Command, code)
	}
	if err := nsCfg.Check(); err != nil {
		t.Fatalf("the name server's config: %v", err)
	}
	published := func(ports []string, container string) string {
		for _, p := range ports {
			parts := strings.Split(p, ":") // host-ip:host-port:container-port
			if len(parts) == 3 && parts[2] == container {
				return parts[0] + ":" + parts[1]
			}
		}
		return ""
	}
	if published(ns.Ports, portOf(t, nsCfg.NamesrvListen)) != "127.0.0.1:9876" {
		t.Errorf("the name server publishes %q", ns.Ports)
	}

	var setName string
	var peers string
	members := 0
	for _, name := range []string{"b0", "b1", "b2"} {
		svc, ok := compose.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		members++
		cfg, _, code := brokerConfig(replaceArg(svc.Command, "/etc/rmq/broker.yaml", containerConfig), io.Discard)
		if code >= 0 {
			t.Fatalf("%s's command %q: exit %d", name, svc.Command, code)
		}
		if err := cfg.Check(); err != nil {
			t.Fatalf("%s's config: %v", name, err)
		}
		c := cfg.Cluster
		if setName == "" {
			setName, peers = c.SetName, fmt.Sprint(c.Peers)
		}
		if c.SetName != setName || fmt.Sprint(c.Peers) != peers || len(c.Peers) != 3 {
			t.Errorf("%s: set %q peers %v; the others: %q %v", name, c.SetName, c.Peers, setName, peers)
		}
		var raftAddr string
		for _, p := range c.Peers {
			if p.ID == c.NodeID {
				raftAddr = p.Addr
			}
		}
		if host, _, _ := net.SplitHostPort(raftAddr); host != svc.Hostname {
			t.Errorf("%s: node %s's raft address %q is not on its hostname %q", name, c.NodeID, raftAddr, svc.Hostname)
		}
		if cfg.NamesrvListen != "" || len(cfg.NameServers) != 1 || cfg.NameServers[0] != "namesrv:"+portOf(t, nsCfg.NamesrvListen) {
			t.Errorf("%s: embedded name server %q, registers with %q", name, cfg.NamesrvListen, cfg.NameServers)
		}
		// Clients on the host dial what the member advertises, where it
		// is published.
		if got := published(svc.Ports, portOf(t, cfg.Listen)); got != cfg.Advertise {
			t.Errorf("%s advertises %s but publishes its port %s at %q", name, cfg.Advertise, cfg.Listen, got)
		}
		if host, _, _ := net.SplitHostPort(cfg.Advertise); published(svc.Ports, portOf(t, cfg.GRPCListen)) != host+":"+portOf(t, cfg.GRPCListen) {
			t.Errorf("%s: gRPC port %s is not published at the advertised host's same port", name, cfg.GRPCListen)
		}
		if published(svc.Ports, portOf(t, cfg.HTTPListen)) == "" {
			t.Errorf("%s does not publish its HTTP port", name)
		}
		if len(svc.Volumes) != 1 || !strings.HasSuffix(svc.Volumes[0], ":"+cfg.DataDir) {
			t.Errorf("%s: volumes %q do not hold its data dir %s", name, svc.Volumes, cfg.DataDir)
		}
	}
	if members != 3 {
		t.Fatalf("%d members", members)
	}
}

// TestSystemdUnit checks deploy/rmq-broker.service with systemd-analyze
// verify, and that its commands are ones the broker accepts.
func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "rmq-broker.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{"DynamicUser=yes", "StateDirectory=rmq-broker", "NoNewPrivileges=yes", "ProtectSystem=strict", "LimitNOFILE="} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %s", want)
		}
	}
	dir := t.TempDir()
	configFile := filepath.Join(dir, "broker.yaml")
	var defaults bytes.Buffer
	if code := run([]string{"config", "defaults"}, &defaults, io.Discard); code != 0 {
		t.Fatal("config defaults failed")
	}
	if err := os.WriteFile(configFile, defaults.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	command := func(key string) []string {
		m := regexp.MustCompile(`(?m)^` + key + `=/usr/local/bin/broker (.*)$`).FindStringSubmatch(unit)
		if m == nil {
			t.Fatalf("the unit has no %s running the broker", key)
		}
		s := strings.ReplaceAll(m[1], "/etc/rmq-broker/broker.yaml", configFile)
		return strings.Fields(strings.ReplaceAll(s, "${STATE_DIRECTORY}", filepath.Join(dir, "state")))
	}
	if code, out, errs := runCmd(command("ExecStartPre")...); code != 0 {
		t.Fatalf("ExecStartPre: exit %d: %s%s", code, out, errs)
	}
	cfg, _, code := brokerConfig(command("ExecStart"), io.Discard)
	if code >= 0 || cfg.DataDir != filepath.Join(dir, "state") {
		t.Fatalf("ExecStart: exit %d, data dir %q", code, cfg.DataDir)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian package systemd): the unit's syntax is not checked")
	}
	// verify wants the unit's executables to exist: this test binary
	// stands in for the broker's.
	path := filepath.Join(dir, "rmq-broker.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/broker", os.Args[0])), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", "--man=no", path).CombinedOutput()
	// verify exits 0 on unknown keys and bad values, saying so: any line
	// about the unit is a failure.
	if err != nil || strings.Contains(string(out), filepath.Base(path)) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestContainerImage builds the image with docker or podman and runs it,
// waiting for its health check's /readyz; it runs only with
// RMQ_CONTAINER_TESTS=1, on a machine whose container engine can pull
// the base images and run containers.
func TestContainerImage(t *testing.T) {
	if os.Getenv("RMQ_CONTAINER_TESTS") != "1" {
		t.Skip("set RMQ_CONTAINER_TESTS=1 to build and run the container image")
	}
	engine := ""
	for _, e := range []string{"docker", "podman"} {
		if p, err := exec.LookPath(e); err == nil && exec.Command(p, "info").Run() == nil {
			engine = p
			break
		}
	}
	if engine == "" {
		t.Fatal("RMQ_CONTAINER_TESTS=1, but neither docker nor podman answers \"info\"")
	}
	do := func(timeout time.Duration, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, engine, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", engine, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tag := "rmq-broker-test:" + strings.ToLower(brokertest.Name("img"))
	do(20*time.Minute, "build", "-t", tag, repoRoot)
	t.Cleanup(func() { exec.Command(engine, "rmi", "-f", tag).Run() })
	id := do(time.Minute, "run", "-d", "-p", "127.0.0.1::8080", tag, "--config", "/etc/rmq/broker.yaml", "--insecure")
	t.Cleanup(func() { exec.Command(engine, "rm", "-f", id).Run() })
	httpAddr := strings.TrimSpace(strings.Split(do(time.Minute, "port", id, "8080/tcp"), "\n")[0])
	brokertest.Eventually(t, 2*time.Minute, "the container's /readyz", func() bool {
		code, _, _ := runCmd("healthcheck", "--addr", httpAddr, "--timeout", "2s")
		return code == 0
	})
	if user := do(time.Minute, "inspect", "-f", "{{.Config.User}}", id); user != "65532:65532" {
		t.Fatalf("the container runs as %q", user)
	}
	do(time.Minute, "stop", "-t", "40", id)
	if code := do(time.Minute, "inspect", "-f", "{{.State.ExitCode}}", id); code != "0" {
		t.Fatalf("the broker exited %s on stop", code)
	}
}
