// machined asks a real etcd member what Talos' machined asks it when talosctl calls the etcd API of a node
// (internal/app/machined/internal/server/v1alpha1 in siderolabs/talos), so that the tests' talosctl
// (tests/fake_talosctl.py) answers from a real etcd cluster: the Talos API itself cannot run here, etcd can
// (docs/adr/0058-real-control-plane-in-tests.md).
//
//	machined [flags] members           EtcdMemberList{QueryLocal: true}: MemberList on the node's own member, with
//	                                   clientv3.WithRequireLeader
//	machined [flags] status            EtcdStatus: Maintenance.Status of the node's own member
//	machined [flags] remove-member ID  EtcdRemoveMemberByID: MemberRemove through the control planes' endpoints,
//	                                   with clientv3.WithRequireLeader (ID: 16 hex digits, as talosctl prints it)
//	machined [flags] snapshot PATH     EtcdSnapshot: Maintenance.Snapshot of the node's own member, the stream written
//	                                   to PATH unchanged (the database and etcd's sha256 of it)
//	machined [flags] leave NAME        EtcdLeaveCluster, as a graceful reset runs it: the member NAME removed through
//	                                   the control planes (retried while etcd says the cluster is unhealthy)
//	machined [flags] add-learner URL   how a new control plane joins: MemberAddAsLearner with its peer URL
//	machined [flags] promote ID        and is promoted once it has caught up (MemberPromote)
//	machined [flags] put KEY VALUE     (tests) a key written, to be read back after a restore
//	machined [flags] get PREFIX        (tests) the keys under PREFIX and their values
//
// Flags: -endpoints (comma-separated client URLs: the node's own for the local calls, every control plane's for the
// others), -cacert, -cert, -key (the etcd client certificate Talos' machined uses), -timeout.
//
// One JSON object on stdout. A failure prints {"error": ..., "code": ...}: the gRPC status machined's server would
// send talosctl for that error (status.Convert: an etcd client error that carries no gRPC status is Unknown), and
// exits 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"
)

type member struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peer_urls"`
	ClientURLs []string `json:"client_urls"`
	Learner    bool     `json:"learner"`
}

func formatID(id uint64) string { return fmt.Sprintf("%016x", id) } // etcdresource.FormatMemberID

func fail(err error) {
	converted := status.Convert(err)
	out, _ := json.Marshal(map[string]string{"error": converted.Message(), "code": converted.Code().String()})
	fmt.Println(string(out))
	os.Exit(1)
}

func answer(value any) {
	out, err := json.Marshal(value)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

func members(listed []*etcdserverpb.Member) []member {
	found := make([]member, 0, len(listed))
	for _, m := range listed {
		found = append(found, member{formatID(m.ID), m.Name, m.PeerURLs, m.ClientURLs, m.IsLearner})
	}
	return found
}

// leave is Talos' Client.LeaveCluster (internal/pkg/etcd): the member found by name in the list, removed, retried
// while etcd answers that the cluster is unhealthy (a member that has not connected to a quorum yet).
func leave(ctx context.Context, client *clientv3.Client, name string) error {
	for {
		listed, err := client.MemberList(ctx)
		if err != nil {
			return fmt.Errorf("failed to get etcd members: %w", err)
		}
		var id uint64
		for _, m := range listed.Members {
			if m.Name == name {
				id = m.ID
			}
		}
		if id == 0 {
			return fmt.Errorf("failed to find %q in list of etcd members", name)
		}
		_, err = client.MemberRemove(ctx, id)
		if err == nil {
			return nil
		}
		if !errors.Is(err, rpctypes.ErrUnhealthy) {
			return fmt.Errorf("failed to remove member %d: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func main() {
	endpoints := flag.String("endpoints", "", "client URLs, comma-separated")
	cacert := flag.String("cacert", "", "CA of the members' serving certificates")
	cert := flag.String("cert", "", "client certificate")
	key := flag.String("key", "", "client key")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of the whole call")
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: machined [flags] members|status|remove-member ID|snapshot PATH|leave NAME|"+
			"add-learner URL|promote ID|put KEY VALUE|get PREFIX")
		os.Exit(2)
	}
	tlsConfig, err := transport.TLSInfo{CertFile: *cert, KeyFile: *key, TrustedCAFile: *cacert}.ClientConfig()
	if err != nil {
		fail(err)
	}
	urls := strings.Split(*endpoints, ",")
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   urls,
		TLS:         tlsConfig,
		DialTimeout: *timeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		fail(err)
	}
	defer client.Close() //nolint:errcheck
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	switch args[0] {
	case "members":
		listed, err := client.MemberList(clientv3.WithRequireLeader(ctx))
		if err != nil {
			fail(err)
		}
		answer(map[string]any{"members": members(listed.Members)})
	case "status":
		got, err := client.Status(ctx, urls[0])
		if err != nil {
			fail(err)
		}
		answer(map[string]any{
			"member_id":          formatID(got.Header.MemberId),
			"db_size":            got.DbSize,
			"db_size_in_use":     got.DbSizeInUse,
			"leader":             formatID(got.Leader),
			"raft_index":         got.RaftIndex,
			"raft_term":          got.RaftTerm,
			"raft_applied_index": got.RaftAppliedIndex,
			"learner":            got.IsLearner,
			"protocol":           got.Version,
			"storage":            got.StorageVersion,
			"errors":             got.Errors,
		})
	case "remove-member", "promote":
		if len(args) != 2 {
			fail(errors.New(args[0] + " needs a member id"))
		}
		id, err := strconv.ParseUint(args[1], 16, 64)
		if err != nil {
			fail(fmt.Errorf("error parsing member ID: %w", err))
		}
		if args[0] == "promote" {
			_, err = client.MemberPromote(ctx, id)
		} else {
			_, err = client.MemberRemove(clientv3.WithRequireLeader(ctx), id)
		}
		if err != nil {
			fail(err)
		}
		answer(map[string]string{"id": formatID(id)})
	case "snapshot":
		if len(args) != 2 {
			fail(errors.New("snapshot needs a path"))
		}
		stream, err := client.Snapshot(ctx)
		if err != nil {
			fail(err)
		}
		file, err := os.OpenFile(args[1], os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			fail(err)
		}
		size, err := io.Copy(file, stream)
		if closed := file.Close(); err == nil {
			err = closed
		}
		if err != nil {
			fail(err)
		}
		answer(map[string]int64{"bytes": size})
	case "leave":
		if len(args) != 2 {
			fail(errors.New("leave needs the member's name"))
		}
		if err := leave(clientv3.WithRequireLeader(ctx), client, args[1]); err != nil {
			fail(err)
		}
		answer(map[string]string{"left": args[1]})
	case "add-learner":
		if len(args) != 2 {
			fail(errors.New("add-learner needs a peer URL"))
		}
		added, err := client.MemberAddAsLearner(ctx, []string{args[1]})
		if err != nil {
			fail(err)
		}
		answer(map[string]any{"id": formatID(added.Member.ID), "members": members(added.Members)})
	case "put":
		if len(args) != 3 {
			fail(errors.New("put needs a key and a value"))
		}
		if _, err := client.Put(ctx, args[1], args[2]); err != nil {
			fail(err)
		}
		answer(map[string]string{args[1]: args[2]})
	case "get":
		if len(args) != 2 {
			fail(errors.New("get needs a prefix"))
		}
		got, err := client.Get(ctx, args[1], clientv3.WithPrefix())
		if err != nil {
			fail(err)
		}
		values := map[string]string{}
		for _, kv := range got.Kvs {
			values[string(kv.Key)] = string(kv.Value)
		}
		answer(map[string]any{"revision": got.Header.Revision, "kvs": values})
	default:
		fail(fmt.Errorf("unknown call %q", args[0]))
	}
}
