// snapgo backs a stream up and restores it the way nats.go's jsm.go does (SnapshotToDirectory,
// RestoreSnapshotFromDirectory), with nats.go alone: the Go client the nats CLI is built on,
// held to jetpy's snapshot and restore protocol by tests/integration/test_backup_go_client.py.
//
//	snapgo backup URL STREAM DIR [no-consumers]
//	snapgo restore URL DIR
//
// Built from Debian's packages (golang-go, golang-github-nats-io-go-nats-dev) in GOPATH mode,
// as /work/shared/bench's natsbench is. Prints one JSON line; exits 1 on any failure.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

type response struct {
	Type           string          `json:"type"`
	Error          *apiError       `json:"error,omitempty"`
	Config         json.RawMessage `json:"config,omitempty"`
	State          json.RawMessage `json:"state,omitempty"`
	DeliverSubject string          `json:"deliver_subject,omitempty"`
}

func request(nc *nats.Conn, subject string, body interface{}, wait time.Duration) (*response, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	m, err := nc.Request(subject, data, wait)
	if err != nil {
		return nil, err
	}
	return parse(m.Data)
}

func parse(data []byte) (*response, error) {
	if strings.HasPrefix(string(data), "-ERR") {
		return nil, errors.New(string(data))
	}
	var r response
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	if r.Error != nil {
		return &r, fmt.Errorf("%s (%d)", r.Error.Description, r.Error.ErrCode)
	}
	return &r, nil
}

func backup(nc *nats.Conn, stream, dir string, consumers bool) (map[string]interface{}, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	df, err := os.Create(filepath.Join(dir, "stream.tar.s2"))
	if err != nil {
		return nil, err
	}
	defer df.Close()
	ib := nats.NewInbox()
	done := make(chan error, 1)
	received, chunks := 0, 0
	sub, err := nc.Subscribe(ib, func(m *nats.Msg) {
		if len(m.Data) == 0 {
			if status := m.Header.Get("Status"); status != "" && status != "204" {
				done <- fmt.Errorf("snapshot ended with status %s %s", status, m.Header.Get("Description"))
				return
			}
			done <- nil
			return
		}
		if _, err := df.Write(m.Data); err != nil {
			done <- err
			return
		}
		received += len(m.Data)
		chunks++
		if m.Reply != "" {
			m.Respond(nil)
		}
	})
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	sub.SetPendingLimits(-1, -1)
	req := map[string]interface{}{"deliver_subject": ib, "no_consumers": !consumers, "chunk_size": 128 * 1024}
	resp, err := request(nc, "$JS.API.STREAM.SNAPSHOT."+stream, req, 5*time.Second)
	if err != nil {
		return nil, err
	}
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
	case <-time.After(60 * time.Second):
		return nil, errors.New("backup timed out")
	}
	meta, err := json.MarshalIndent(map[string]json.RawMessage{"config": resp.Config, "state": resp.State}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "backup.json"), meta, 0o600); err != nil {
		return nil, err
	}
	return map[string]interface{}{"bytes": received, "chunks": chunks}, nil
}

func restore(nc *nats.Conn, dir string) (map[string]interface{}, error) {
	meta, err := os.ReadFile(filepath.Join(dir, "backup.json"))
	if err != nil {
		return nil, err
	}
	var req struct {
		Config map[string]interface{} `json:"config"`
		State  json.RawMessage        `json:"state"`
	}
	if err := json.Unmarshal(meta, &req); err != nil {
		return nil, err
	}
	name, _ := req.Config["name"].(string)
	resp, err := request(nc, "$JS.API.STREAM.RESTORE."+name, req, 5*time.Second)
	if err != nil {
		return nil, err
	}
	df, err := os.Open(filepath.Join(dir, "stream.tar.s2"))
	if err != nil {
		return nil, err
	}
	defer df.Close()
	var chunk [64 * 1024]byte
	sent := 0
	for {
		n, err := df.Read(chunk[:])
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		m, err := nc.Request(resp.DeliverSubject, chunk[:n], 5*time.Second)
		if err != nil {
			return nil, err
		}
		if len(m.Data) > 0 {
			if _, err := parse(m.Data); err != nil {
				return nil, fmt.Errorf("restore failed: %v", err)
			}
		}
		sent += n
	}
	m, err := nc.Request(resp.DeliverSubject, nil, time.Hour)
	if err != nil {
		return nil, err
	}
	final, err := parse(m.Data)
	if err != nil {
		return nil, err
	}
	if final.Type != "io.nats.jetstream.api.v1.stream_create_response" {
		return nil, fmt.Errorf("invalid final response %q", final.Type)
	}
	var state map[string]interface{}
	json.Unmarshal(final.State, &state)
	return map[string]interface{}{"sent": sent, "state": state}, nil
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: snapgo backup URL STREAM DIR [no-consumers] | snapgo restore URL DIR")
		os.Exit(2)
	}
	nc, err := nats.Connect(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer nc.Close()
	var out map[string]interface{}
	switch os.Args[1] {
	case "backup":
		out, err = backup(nc, os.Args[3], os.Args[4], len(os.Args) < 6 || os.Args[5] != "no-consumers")
	case "restore":
		out, err = restore(nc, os.Args[3])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
