// etcd-snapshot reads an etcd snapshot the way etcd itself does, so that terravixens can keep only snapshots a
// restore would accept (docs/adr/0030-etcd-snapshots.md).
//
//	etcd-snapshot verify FILE        one JSON object on stdout; exit 0 when the snapshot is whole and readable
//	etcd-snapshot make-fixture OUT   (tests) a genuine snapshot from an embedded etcd on loopback (-name and
//	                                 -peer-url: the member's name and the peer URL it advertises, nothing dials it)
//	etcd-snapshot -version           the etcd and bbolt modules it was built with
//	etcd-snapshot inspect FILE       (internal) the database checks of verify, run by verify in a child process
//
// What `talosctl etcd snapshot` writes is exactly what etcd's Maintenance.Snapshot RPC streams (machined passes the
// clientv3 reader through unchanged): the bbolt database file followed by the 32-byte sha256 of that database.
// `verify` checks, in this order, what etcd's own tools check:
//  1. size: not empty, and 512*k+32 bytes (etcdutl's and talosctl's test that the digest is there);
//  2. sha256: the digest of everything before the last 32 bytes equals those 32 bytes (what `etcdutl snapshot
//     restore`, and so `talosctl bootstrap --recover-from`, refuses to restore without);
//  3. bbolt and etcd: etcdutl's `snapshot status` code (bbolt's own consistency check of every page, then every
//     bucket read, revisions parsed, keys counted) and the cluster's recorded version and members.
//
// The members (name, peer and client URLs, learner or not) and the ids of removed members are read by etcd's own
// membership reader (go.etcd.io/etcd/server/v3/storage/schema: the code etcd runs to recover its membership from
// its backend), over a read-only bbolt transaction. They are what tells whose etcd a snapshot is: Talos names each
// member after its node's hostname and advertises https://<its address>:2380. etcd keeps no cluster id in its
// backend (the id lives in the WAL and raft's snapshots, which a snapshot file does not carry; `etcdutl snapshot
// restore` makes a new one from the members it is told), so the report has none.
//
// A failure prints {"ok": false, "check": <which>, "reason": <why>} and exits 1; a file that cannot be read at all
// exits 2. Nothing is written next to the snapshot; the database is opened read-only, in a child process (a corrupt
// database can crash bbolt's reader: the crash is then the answer, not the verifier's end).
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
)

// digestSize is what etcd appends; sector is etcdutl's hasChecksum modulus (a disk sector, a divisor of any page).
const (
	digestSize = sha256.Size
	sector     = 512
)

// Member is one etcd member as the snapshot's `members` bucket records it.
type Member struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peer_urls"`
	ClientURLs []string `json:"client_urls"`
	IsLearner  bool     `json:"is_learner"`
}

// Report is what `verify` prints.
type Report struct {
	OK     bool   `json:"ok"`
	File   string `json:"file"`
	Check  string `json:"check,omitempty"`  // the check that failed
	Reason string `json:"reason,omitempty"` // why, in one sentence
	// Passed lists the checks done, in order: size, sha256, bbolt, etcd.
	Passed []string `json:"passed"`
	Size   int64    `json:"size"`             // bytes of the file, digest included
	SHA256 string   `json:"sha256,omitempty"` // of the whole file, as `sha256sum` prints it
	// DBSize and DBSHA256: the database alone (the file less etcd's digest); DBSHA256 equals that digest.
	DBSize   int64  `json:"db_size,omitempty"`
	DBSHA256 string `json:"db_sha256,omitempty"`
	HashOK   bool   `json:"hash_ok"`
	// From etcdutl's snapshot status, as `talosctl etcd snapshot` prints it ("snapshot info: hash %08x, revision
	// %d, total keys %d, total size %d").
	EtcdHash       string   `json:"etcd_hash,omitempty"`
	Revision       int64    `json:"revision"`
	TotalKeys      int      `json:"total_keys"`
	TotalSize      int64    `json:"total_size"`
	StorageVersion string   `json:"storage_version"` // empty before etcd 3.6
	ClusterVersion string   `json:"cluster_version"`
	ConsistentIdx  uint64   `json:"consistent_index"`
	Members        []Member `json:"members"`
	RemovedIDs     []string `json:"removed_member_ids"` // members removed from the cluster (etcd's members_removed)
	Tool           string   `json:"tool"`               // the etcdutl module that judged it
}

func main() {
	version := flag.Bool("version", false, "print the etcd and bbolt modules this binary was built with")
	timeout := flag.Duration("timeout", 5*time.Minute, "verify: how long reading the database may take")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: etcd-snapshot verify FILE | etcd-snapshot make-fixture [-keys N] [-name NAME] "+
			"[-peer-url URL] OUT | etcd-snapshot -version")
	}
	flag.Parse()
	if *version {
		printJSON(modules())
		return
	}
	args := flag.Args()
	switch {
	case len(args) == 2 && args[0] == "verify":
		report, readable := verify(args[1], *timeout)
		printJSON(report)
		if !readable {
			os.Exit(2)
		}
		if !report.OK {
			fmt.Fprintf(os.Stderr, "%s: %s check failed: %s\n", args[1], report.Check, report.Reason)
			os.Exit(1)
		}
	case len(args) == 2 && args[0] == "inspect":
		printJSON(inspect(args[1]))
	case len(args) >= 2 && args[0] == "make-fixture":
		os.Exit(makeFixture(args[1:]))
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func printJSON(value any) {
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(value); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// modules names the modules whose code judges a snapshot (what a report's Tool says).
func modules() map[string]string {
	found := map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			switch dep.Path {
			case "go.etcd.io/etcd/etcdutl/v3", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/client/v3", "go.etcd.io/bbolt":
				found[dep.Path] = dep.Version
			}
		}
	}
	return found
}

// verify returns the report and whether the file could be read at all.
func verify(path string, timeout time.Duration) (Report, bool) {
	report := Report{File: path, Passed: []string{}, Members: []Member{}, RemovedIDs: []string{},
		Tool: "go.etcd.io/etcd/etcdutl/v3 " + modules()["go.etcd.io/etcd/etcdutl/v3"]}
	fail := func(check, format string, args ...any) (Report, bool) {
		report.Check, report.Reason = check, fmt.Sprintf(format, args...)
		return report, true
	}

	file, err := os.Open(path)
	if err != nil {
		report.Check, report.Reason = "read", err.Error()
		return report, false
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		report.Check, report.Reason = "read", err.Error()
		return report, false
	}
	if !info.Mode().IsRegular() {
		report.Check, report.Reason = "read", "not a regular file"
		return report, false
	}
	report.Size = info.Size()

	// One pass over the file: the whole file's digest, and the database's (all but the last 32 bytes).
	whole, database := sha256.New(), sha256.New()
	trailer := make([]byte, 0, digestSize)
	if report.Size > digestSize {
		if _, err := io.CopyN(io.MultiWriter(whole, database), file, report.Size-digestSize); err != nil {
			report.Check, report.Reason = "read", err.Error()
			return report, false
		}
	}
	rest, err := io.ReadAll(file)
	if err != nil {
		report.Check, report.Reason = "read", err.Error()
		return report, false
	}
	whole.Write(rest)
	trailer = append(trailer, rest...)
	report.SHA256 = hex.EncodeToString(whole.Sum(nil))

	switch {
	case report.Size == 0:
		return fail("size", "the file is empty: no snapshot was written")
	case report.Size%sector != digestSize:
		return fail("size", "%d bytes is not 512*k+32: there is no sha256 digest where etcd appends one (the file "+
			"is truncated, has bytes appended, or was not streamed from etcd's Maintenance.Snapshot by `talosctl etcd "+
			"snapshot` or `etcdctl snapshot save`)", report.Size)
	}
	report.Passed = append(report.Passed, "size")
	report.DBSize = report.Size - digestSize
	computed := database.Sum(nil)
	report.DBSHA256 = hex.EncodeToString(computed)
	if !bytes.Equal(computed, trailer) {
		return fail("sha256", "the database hashes to %s but etcd appended %s: the file was altered after etcd "+
			"streamed it (a restore would refuse it)", report.DBSHA256, hex.EncodeToString(trailer))
	}
	report.HashOK = true
	report.Passed = append(report.Passed, "sha256")

	inspected := inspectApart(path, timeout)
	report.Passed = append(report.Passed, inspected.Passed...)
	if inspected.Check != "" {
		return fail(inspected.Check, "%s", inspected.Reason)
	}
	report.EtcdHash, report.Revision, report.TotalKeys = inspected.EtcdHash, inspected.Revision, inspected.TotalKeys
	report.TotalSize, report.StorageVersion = inspected.TotalSize, inspected.StorageVersion
	report.ClusterVersion, report.ConsistentIdx = inspected.ClusterVersion, inspected.ConsistentIdx
	report.Members, report.RemovedIDs = inspected.Members, inspected.RemovedIDs
	report.OK = true
	return report, true
}

// Inspection is what the database checks found (the `inspect` subcommand's output).
type Inspection struct {
	Passed         []string `json:"passed"`
	Check          string   `json:"check,omitempty"`
	Reason         string   `json:"reason,omitempty"`
	EtcdHash       string   `json:"etcd_hash,omitempty"`
	Revision       int64    `json:"revision"`
	TotalKeys      int      `json:"total_keys"`
	TotalSize      int64    `json:"total_size"`
	StorageVersion string   `json:"storage_version"`
	ClusterVersion string   `json:"cluster_version"`
	ConsistentIdx  uint64   `json:"consistent_index"`
	Members        []Member `json:"members"`
	RemovedIDs     []string `json:"removed_member_ids"`
}

// stagePrefix marks, on the inspecting process's stderr, the check it is starting: if it dies, that check failed.
const stagePrefix = "etcd-snapshot stage: "

// inspectApart runs the database checks in a child process (this binary's `inspect`). bbolt maps the file and
// follows the page numbers it finds in it, partly in goroutines of its own: a corrupt database whose sha256 is
// right can crash the process that reads it (a fault, or a panic no caller can recover). So the reading happens
// where a crash is only an answer: which check was running, and the first line of what the runtime said.
func inspectApart(path string, timeout time.Duration) Inspection {
	self, err := os.Executable()
	if err != nil {
		return Inspection{Check: "bbolt", Reason: fmt.Sprintf("cannot find this binary to inspect apart: %v", err)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	command := exec.CommandContext(ctx, self, "inspect", path)
	command.Stdout, command.Stderr = &stdout, &stderr
	runErr := command.Run()
	var inspected Inspection
	if runErr == nil && json.Unmarshal(stdout.Bytes(), &inspected) == nil {
		return inspected
	}
	stage, said := "bbolt", ""
	for _, line := range strings.Split(stderr.String(), "\n") {
		switch {
		case strings.HasPrefix(line, stagePrefix):
			stage = strings.TrimPrefix(line, stagePrefix)
		case said == "" && (strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") ||
			strings.HasPrefix(line, "unexpected fault address")):
			said = strings.TrimSpace(line)
		}
	}
	inspected = Inspection{Passed: []string{}, Check: stage}
	for _, check := range []string{"bbolt", "etcd"} {
		if check == stage {
			break
		}
		inspected.Passed = append(inspected.Passed, check)
	}
	switch {
	case ctx.Err() != nil:
		inspected.Reason = fmt.Sprintf("reading the database took longer than %s: stopped", timeout)
	case said != "":
		inspected.Reason = fmt.Sprintf("reading the database crashed etcd's code (%s): the database is corrupt", said)
	default:
		inspected.Reason = fmt.Sprintf("reading the database failed (%v): %s", runErr,
			strings.TrimSpace(stderr.String()))
	}
	return inspected
}

// inspect is the child's side: bbolt's own open and page bounds, then etcdutl's snapshot status (bbolt's
// consistency check of every page, every bucket read, revisions parsed, live keys counted), then what the
// snapshot records of its cluster. It prints an Inspection; it may also crash (see inspectApart).
func inspect(path string) Inspection {
	inspected := Inspection{Passed: []string{}, Members: []Member{}, RemovedIDs: []string{}}
	stage := func(name string) { fmt.Fprintln(os.Stderr, stagePrefix+name) }
	stage("bbolt")
	if err := readable(path); err != nil {
		inspected.Check, inspected.Reason = "bbolt", fmt.Sprintf("not a readable bbolt database: %v", err)
		return inspected
	}
	inspected.Passed = append(inspected.Passed, "bbolt")
	stage("etcd")
	status, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		inspected.Check, inspected.Reason = "etcd", fmt.Sprintf("etcd's snapshot status refused it: %v", err)
		return inspected
	}
	inspected.EtcdHash = fmt.Sprintf("%08x", status.Hash)
	inspected.Revision, inspected.TotalKeys, inspected.TotalSize = status.Revision, status.TotalKey, status.TotalSize
	inspected.StorageVersion = status.Version
	if err := readCluster(path, &inspected); err != nil {
		inspected.Check, inspected.Reason = "etcd", fmt.Sprintf("no etcd cluster in it: %v", err)
		return inspected
	}
	inspected.Passed = append(inspected.Passed, "etcd")
	return inspected
}

// readable opens the database as bbolt does (both meta pages, page size, bounds) and checks that the pages it
// says it has fit in the file before etcd's code walks them.
func readable(path string) error {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		// tx.Size() is the meta page's high-water mark (its page count times the page size).
		if info, err := os.Stat(path); err == nil && info.Size()-digestSize < tx.Size() {
			return fmt.Errorf("its meta page counts %d bytes of pages, the file holds %d before the digest: "+
				"truncated", tx.Size(), info.Size()-digestSize)
		}
		return nil
	})
}

// readCluster reads what the snapshot records of its cluster: the cluster version, the members, the last applied
// raft index. An etcd database always has the members bucket: a bbolt file without it is not etcd's.
func readCluster(path string, report *Inspection) (err error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) (err error) {
		if tx.Bucket(schema.Members.Name()) == nil {
			return fmt.Errorf("bucket %q is missing", schema.Members.Name())
		}
		// etcd's reader panics (through its logger) on a member it cannot parse: that is an answer here.
		defer func() {
			if caught := recover(); caught != nil {
				err = fmt.Errorf("etcd's membership reader refused it: %v", caught)
			}
		}()
		members, removed := schema.NewMembershipBackend(zap.NewNop(), readOnly{tx: tx}).MustReadMembersFromBackend()
		for id, member := range members {
			// As talosctl prints member IDs (etcd's own key drops leading zeros).
			report.Members = append(report.Members, Member{ID: fmt.Sprintf("%016x", uint64(id)), Name: member.Name,
				PeerURLs: nonNil(member.PeerURLs), ClientURLs: nonNil(member.ClientURLs), IsLearner: member.IsLearner})
		}
		sort.Slice(report.Members, func(i, j int) bool { return report.Members[i].ID < report.Members[j].ID })
		for id := range removed {
			report.RemovedIDs = append(report.RemovedIDs, fmt.Sprintf("%016x", uint64(id)))
		}
		sort.Strings(report.RemovedIDs)
		if cluster := tx.Bucket(schema.Cluster.Name()); cluster != nil {
			report.ClusterVersion = string(cluster.Get(schema.ClusterClusterVersionKeyName))
		}
		if meta := tx.Bucket(schema.Meta.Name()); meta != nil {
			if index := meta.Get(schema.MetaConsistentIndexKeyName); len(index) == 8 {
				report.ConsistentIdx = binary.BigEndian.Uint64(index)
			}
		}
		return nil
	})
}

// readOnly is an etcd backend over one read-only bbolt transaction, for etcd's own readers (schema's membership
// backend). Only ReadTx is implemented; any other method of backend.Backend is the nil interface embedded, so a
// reader that tried to write would panic instead: nothing here can change the file.
type readOnly struct {
	backend.Backend
	tx *bolt.Tx
}

func (b readOnly) ReadTx() backend.ReadTx { return readTx(b) }

// readTx reads as etcd's baseReadTx does straight from bbolt (a missing bucket is empty); no buffer, no lock: the
// transaction is this process's only one.
type readTx readOnly

func (readTx) RLock()   {}
func (readTx) RUnlock() {}

func (r readTx) UnsafeForEach(bucket backend.Bucket, visitor func(k, v []byte) error) error {
	if found := r.tx.Bucket(bucket.Name()); found != nil {
		return found.ForEach(visitor)
	}
	return nil
}

// UnsafeRange: etcd's unsafeRange (storage/backend/batch_tx.go): one key, or [key, endKey) up to limit.
func (r readTx) UnsafeRange(bucket backend.Bucket, key, endKey []byte, limit int64) (keys, values [][]byte) {
	found := r.tx.Bucket(bucket.Name())
	if found == nil {
		return nil, nil
	}
	if limit <= 0 {
		limit = math.MaxInt64
	}
	match := func(b []byte) bool { return bytes.Equal(b, key) }
	if len(endKey) > 0 {
		match = func(b []byte) bool { return bytes.Compare(b, endKey) < 0 }
	} else {
		limit = 1
	}
	cursor := found.Cursor()
	for k, v := cursor.Seek(key); k != nil && match(k); k, v = cursor.Next() {
		keys, values = append(keys, k), append(values, v)
		if int64(len(keys)) == limit {
			break
		}
	}
	return keys, values
}

func nonNil(values []string) []string {
	if values == nil {
		return []string{}
	}
	return values
}

// Fixture is what make-fixture prints.
type Fixture struct {
	Path     string            `json:"path"`
	Bytes    int64             `json:"bytes"`
	Keys     int               `json:"keys"`     // live keys written (the snapshot also holds a deleted one)
	Revision int64             `json:"revision"` // the store's revision when the snapshot was taken
	Member   string            `json:"member_id"`
	Cluster  string            `json:"cluster_id"`
	Version  string            `json:"etcd_version"`
	Modules  map[string]string `json:"modules"`
}

// makeFixture starts a one-member etcd on loopback (ports chosen by the kernel, data in a temporary directory that
// is removed afterwards; named -name, advertising -peer-url to nobody), writes keys, and saves a snapshot taken through the client's Maintenance API exactly as
// machined streams it to talosctl: every byte of the stream, digest included, into OUT.part, then renamed to OUT.
func makeFixture(args []string) int {
	flags := flag.NewFlagSet("make-fixture", flag.ContinueOnError)
	keys := flags.Int("keys", 20, "live keys to write")
	valueSize := flags.Int("value-size", 64, "bytes per value")
	name := flags.String("name", "fixture", "the member's name (Talos names a member after its node's hostname)")
	peerURL := flags.String("peer-url", "", "the peer URL the member advertises (default: the loopback one it "+
		"listens on); a one-member cluster dials no peer, so any address can stand here, as Talos' https://IP:2380")
	usage := "usage: etcd-snapshot make-fixture [-keys N] [-value-size BYTES] [-name NAME] [-peer-url URL] OUT"
	if err := flags.Parse(args); err != nil || flags.NArg() != 1 || *keys < 1 || *name == "" {
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	var advertised *url.URL
	if *peerURL != "" {
		parsed, err := url.Parse(*peerURL)
		if err != nil || parsed.Host == "" || (parsed.Scheme != "http" && parsed.Scheme != "https") {
			fmt.Fprintf(os.Stderr, "make-fixture: -peer-url %q is not an http(s)://HOST:PORT URL\n", *peerURL)
			return 2
		}
		advertised = parsed
	}
	out := flags.Arg(0)
	fixture, err := fixture(out, *keys, *valueSize, *name, advertised)
	if err != nil {
		fmt.Fprintf(os.Stderr, "make-fixture: %v\n", err)
		return 1
	}
	printJSON(fixture)
	return 0
}

func fixture(out string, keys, valueSize int, name string, advertised *url.URL) (Fixture, error) {
	result := Fixture{Path: out, Keys: keys, Modules: modules()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dir, err := os.MkdirTemp("", "etcd-snapshot-fixture-")
	if err != nil {
		return result, err
	}
	defer os.RemoveAll(dir)

	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = filepath.Join(dir, "data")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{loopback}, []url.URL{loopback}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{loopback}, []url.URL{loopback}
	if advertised != nil {
		cfg.AdvertisePeerUrls = []url.URL{*advertised}
	}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.InitialClusterToken = "terravixens-fixture"
	// Quiet: its shutdown logs errors for listeners it closes itself. A failure comes back as an error.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // a throw-away store: its durability is not what the fixture tests

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		return result, fmt.Errorf("starting the embedded etcd: %w", err)
	}
	defer server.Close()
	select {
	case <-server.Server.ReadyNotify():
	case err := <-server.Err():
		return result, fmt.Errorf("embedded etcd stopped: %w", err)
	case <-ctx.Done():
		return result, errors.New("embedded etcd was not ready within 60s")
	}
	result.Member = fmt.Sprintf("%016x", uint64(server.Server.MemberID()))
	result.Cluster = fmt.Sprintf("%016x", uint64(server.Server.Cluster().ID()))
	result.Version = version.Version

	client, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Clients[0].Addr().String()},
		DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return result, err
	}
	defer client.Close()

	value := bytes.Repeat([]byte("v"), valueSize)
	for i := 0; i < keys; i++ {
		if _, err := client.Put(ctx, fmt.Sprintf("/registry/fixture/key-%04d", i), string(value)); err != nil {
			return result, err
		}
	}
	// A key overwritten and one deleted: the snapshot holds history, as a real cluster's does.
	if _, err := client.Put(ctx, "/registry/fixture/key-0000", "rewritten"); err != nil {
		return result, err
	}
	if _, err := client.Put(ctx, "/registry/fixture/deleted", "gone"); err != nil {
		return result, err
	}
	deleted, err := client.Delete(ctx, "/registry/fixture/deleted")
	if err != nil {
		return result, err
	}
	result.Revision = deleted.Header.Revision

	stream, err := client.Maintenance.Snapshot(ctx)
	if err != nil {
		return result, fmt.Errorf("snapshot: %w", err)
	}
	defer stream.Close()
	part := out + ".part"
	dest, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return result, err
	}
	defer os.Remove(part)
	size, err := io.Copy(dest, stream)
	if err == nil {
		err = dest.Sync()
	}
	if closeErr := dest.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return result, fmt.Errorf("reading the snapshot stream: %w", err)
	}
	if size%sector != digestSize {
		return result, fmt.Errorf("the stream had %d bytes: no sha256 digest at its end", size)
	}
	result.Bytes = size
	return result, os.Rename(part, out)
}
