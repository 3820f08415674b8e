package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// smallDiskSize is the filesystem TestBrokerOnFullDisk fills.
const smallDiskSize = 64 << 20

// mountSmallDisk mounts a filesystem of size bytes for the test and
// returns its directory: ext4 on a loop device, as a broker's disk would
// be, or tmpfs where that cannot be made. It skips the test where this
// machine cannot mount (not root, no loop devices, no tmpfs), and
// unmounts in the test's cleanup.
func mountSmallDisk(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) error {
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	img := filepath.Join(base, "disk.img")
	ext4 := func() error {
		f, err := os.Create(img)
		if err != nil {
			return err
		}
		err = f.Truncate(size)
		f.Close()
		if err != nil {
			return err
		}
		// -m 0: no blocks kept for root, who runs this test; a full disk
		// is then full for the broker too.
		if err := run("mkfs.ext4", "-q", "-F", "-m", "0", img); err != nil {
			return err
		}
		return run("mount", "-o", "loop", img, dir)
	}
	kind := "ext4"
	if err4 := ext4(); err4 != nil {
		kind = "tmpfs"
		if err := run("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", dir); err != nil {
			t.Skipf("cannot mount a small filesystem here: %v; %v", err4, err)
		}
	}
	t.Cleanup(func() {
		if err := run("umount", dir); err != nil {
			t.Errorf("unmount: %v", err)
			_ = run("umount", "-l", dir)
		}
	})
	t.Logf("mounted %d MiB of %s at %s", size>>20, kind, dir)
	return dir
}

// fillDisk writes a file into dir until the filesystem says it is full.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for {
			if _, err = f.Write(buf); err != nil {
				break
			}
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling the disk: %v", err)
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("disk filled: %d bytes free", st.Bavail*uint64(st.Bsize))
	return path
}

// TestBrokerOnFullDisk stores messages with a broker in a child process
// on a small filesystem, stops it, fills the filesystem and starts the
// broker again. It must open its port, serve the stored messages by
// queue offset and by commit-log offset, take and answer consumer
// offsets, refuse sends with SERVICE_NOT_AVAILABLE naming the disk, and
// keep its log short; once the filler is deleted, a send succeeds
// without a restart. A disk filled while it runs does the same. Before the store kept a reserve for its index, this
// start never opened the port and logged about 1 MB a second.
func TestBrokerOnFullDisk(t *testing.T) {
	rlog.SetLogLevel("error")
	disk := mountSmallDisk(t, smallDiskSize)
	cfg := filepath.Join(t.TempDir(), "broker.yaml")
	// A small index memtable and reserve, so the index's log and the
	// reserve fit the small disk.
	if err := os.WriteFile(cfg, []byte("store:\n  indexMemTableSize: 1MiB\n  diskReserve: 4MiB\n  segmentSize: 8MiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", cfg, "--data-dir", filepath.Join(disk, "data"), "--listen", "127.0.0.1:0",
		"--namesrv-listen", "127.0.0.1:0", "--grpc-listen", "", "--log-level", "info"}
	topic := "FullDisk"
	newProducer := func(nsAddr string) rocketmq.Producer {
		t.Helper()
		p, err := producer.NewDefaultProducer(
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
			producer.WithInstanceName(brokertest.Name("full")),
			producer.WithGroupName(brokertest.Name("pg")),
			producer.WithRetry(0),
			producer.WithSendMsgTimeout(5*time.Second),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Shutdown() })
		return p
	}

	// A first run stores messages, then stops.
	cmd, _, nsAddr, _ := startChild(t, args...)
	p := newProducer(nsAddr)
	type sent struct {
		queue  int32
		offset int64
	}
	stored := map[string]sent{}
	for i := range 40 {
		body := fmt.Sprintf("stored-%02d", i)
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", body, res, err)
		}
		stored[body] = sent{int32(res.MessageQueue.QueueId), res.QueueOffset}
	}
	p.Shutdown()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(disk, "data", "RESERVE")); err != nil {
		t.Fatalf("no reserve file after the first run: %v", err)
	}

	filler := fillDisk(t, disk)

	// The second run starts on the full disk: startChild waits for it to
	// say it listens.
	_, brokerAddr, nsAddr, logs := startChild(t, args...)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	call := func(code int16, ext map[string]string) *remoting.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := cl.Invoke(ctx, brokerAddr, remoting.NewRequest(code, ext, nil))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	group := "FullDiskReader"
	pull := func(queue int32, offset int64) []message.Record {
		t.Helper()
		r := call(remoting.PullMessage, map[string]string{"consumerGroup": group, "topic": topic,
			"queueId": strconv.Itoa(int(queue)), "queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": "1",
			"sysFlag": "4", "subscription": "*", "expressionType": "TAG", "commitOffset": "0", "suspendTimeoutMillis": "0"})
		if r.Code != remoting.Success {
			t.Fatalf("pull of queue %d at %d on a full disk: %v", queue, offset, r)
		}
		recs, err := message.DecodeRecords(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	for body, at := range stored {
		recs := pull(at.queue, at.offset)
		if len(recs) != 1 || string(recs[0].Body()) != body {
			t.Fatalf("pull of queue %d at %d: %d records, want %s", at.queue, at.offset, len(recs), body)
		}
		v := call(remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(recs[0].CommitLogOffset(), 10)})
		if v.Code != remoting.Success || !strings.Contains(string(v.Body), body) {
			t.Fatalf("view of %s by its commit-log offset: %v", body, v)
		}
	}
	r := call(remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "3"})
	if r.Code != remoting.Success {
		t.Fatalf("commit of a consumer offset on a full disk: %v", r)
	}
	r = call(remoting.QueryConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0"})
	if r.Code != remoting.Success || r.Get("offset") != "3" {
		t.Fatalf("query of the consumer offset on a full disk: %v offset %q", r, r.Get("offset"))
	}

	httpAddr := regexp.MustCompile(`msg="broker started" .* http=(\S+)`).FindStringSubmatch(logs.String())
	if httpAddr == nil {
		t.Fatalf("no HTTP address in the log:\n%s", logs.String())
	}
	diskFullGauge := func() string {
		t.Helper()
		resp, err := http.Get("http://" + httpAddr[1] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^rmq_store_disk_full (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatal("no rmq_store_disk_full in /metrics")
		}
		return string(m[1])
	}
	if g := diskFullGauge(); g != "1" {
		t.Fatalf("rmq_store_disk_full %s on a full disk", g)
	}

	p = newProducer(nsAddr)
	_, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("refused")))
	// The client reports the broker's code and remark in its error's text.
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("CODE: %d,", remoting.ServiceNotAvailable)) || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("send on a full disk: %v, want SERVICE_NOT_AVAILABLE naming the disk", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var res *primitive.SendResult
	brokertest.Eventually(t, 15*time.Second, "a send after space was freed", func() bool {
		res, err = p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("after")))
		return err == nil && res.Status == primitive.SendOK
	})
	if recs := pull(int32(res.MessageQueue.QueueId), res.QueueOffset); len(recs) != 1 || string(recs[0].Body()) != "after" {
		t.Fatalf("the message sent after space was freed: %d records", len(recs))
	}
	if g := diskFullGauge(); g != "0" {
		t.Fatalf("rmq_store_disk_full %s once space was freed", g)
	}

	// The disk fills again under the running broker: sends are refused
	// (a few may still land in blocks the log reserved ahead), and taken
	// again once it is freed.
	filler = fillDisk(t, disk)
	brokertest.Eventually(t, 15*time.Second, "a send refused on a disk filled while running", func() bool {
		_, err = p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("maybe")))
		return err != nil && strings.Contains(err.Error(), "disk is full")
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 15*time.Second, "a send after space was freed again", func() bool {
		res, err = p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("after again")))
		return err == nil && res.Status == primitive.SendOK
	})

	// The run logged the full disk a few times, not a line per retry.
	if n := len(logs.String()); n > 64<<10 {
		t.Fatalf("the broker logged %d bytes on a full disk:\n%.4000s", n, logs.String())
	}
	t.Logf("the broker logged %d bytes:\n%s", len(logs.String()), logs.String())
}
