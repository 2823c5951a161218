// clusterbench: core pub/sub across a cluster, the publisher on one server and the subscriber on
// another, so that every message crosses a route. Built like natsbench (GOPATH mode, Debian's
// nats.go) by scripts/compare_bench.py. One JSON line per run, with natsbench's field names.
//
//	clusterbench -pub nats://127.0.0.1:4223 -sub nats://127.0.0.1:4222 -n 500000 -spids 1,2,3
//
// Before measuring, it waits until the subscription is known on the publisher's server: a
// warm-up subject subscribed after the measured one is published to until it arrives (the
// publisher's server then knows both, their announcements arriving in order on the route).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

type result struct {
	Tool        string  `json:"tool"`
	Scenario    string  `json:"scenario"`
	Label       string  `json:"label"`
	N           int     `json:"n"`
	Size        int     `json:"size"`
	Received    int64   `json:"received"`
	Complete    bool    `json:"complete"`
	Elapsed     float64 `json:"elapsed_s"`
	MsgsPerS    float64 `json:"msgs_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	PubMsgsPerS float64 `json:"pub_msgs_per_s"`
	CPUPerMsg   float64 `json:"server_cpu_us_per_msg,omitempty"`
	Errors      int64   `json:"errors"`
}

var (
	pubURL  = flag.String("pub", "nats://127.0.0.1:4223", "the publisher's server")
	subURL  = flag.String("sub", "nats://127.0.0.1:4222", "the subscriber's server")
	n       = flag.Int("n", 500000, "messages")
	size    = flag.Int("size", 128, "payload bytes")
	subject = flag.String("subject", "bench.cluster", "subject")
	timeout = flag.Duration("timeout", time.Minute, "bound on the measured phase")
	spids   = flag.String("spids", "", "the servers' pids (same host), comma separated: CPU per message")
	label   = flag.String("label", "", "copied into the JSON")
)

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "clusterbench: "+format+"\n", a...)
	os.Exit(2)
}

func connect(url, name string) *nats.Conn {
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(0), nats.DontRandomize(), nats.Timeout(5*time.Second))
	if err != nil {
		die("connect %s: %v", url, err)
	}
	return nc
}

// ticks is the CPU (user+system clock ticks) the listed processes have used so far.
func ticks() int64 {
	var total int64
	for _, p := range strings.Split(*spids, ",") {
		if p == "" {
			continue
		}
		b, err := os.ReadFile("/proc/" + p + "/stat")
		if err != nil {
			return -1
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += ut + st
	}
	return total
}

func main() {
	flag.Parse()
	payload := make([]byte, *size)
	target := int64(*n)
	sub := connect(*subURL, "bench-sub")
	defer sub.Close()
	var count, last int64
	done := make(chan struct{})
	s, err := sub.Subscribe(*subject, func(m *nats.Msg) {
		if atomic.AddInt64(&count, 1) == target {
			atomic.StoreInt64(&last, time.Now().UnixNano())
			close(done)
		}
	})
	if err != nil {
		die("subscribe: %v", err)
	}
	s.SetPendingLimits(-1, -1)
	warm := make(chan struct{}, 1)
	if _, err := sub.Subscribe(*subject+".warm", func(m *nats.Msg) {
		select {
		case warm <- struct{}{}:
		default:
		}
	}); err != nil {
		die("subscribe: %v", err)
	}
	sub.Flush()
	pub := connect(*pubURL, "bench-pub")
	defer pub.Close()
	ready := time.Now().Add(30 * time.Second)
	for waiting := true; waiting; {
		pub.Publish(*subject+".warm", nil)
		pub.Flush()
		select {
		case <-warm:
			waiting = false
		case <-time.After(50 * time.Millisecond):
			if time.Now().After(ready) {
				die("the subscription never reached the publisher's server")
			}
		}
	}
	deadline := time.Now().Add(*timeout)
	cpu0 := ticks()
	start := time.Now()
	var errs int64
	for j := 0; j < *n; j++ {
		if j&1023 == 0 && time.Now().After(deadline) {
			break
		}
		if err := pub.Publish(*subject, payload); err != nil {
			errs++
			break
		}
	}
	pub.FlushTimeout(time.Until(deadline) + 5*time.Second)
	pubEnd := time.Now()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
	}
	got := atomic.LoadInt64(&count)
	end := atomic.LoadInt64(&last)
	if got < target {
		end = time.Now().UnixNano()
	}
	cpu1 := ticks()
	r := result{Tool: "clusterbench", Scenario: "cluster-pubsub", Label: *label, N: *n, Size: *size,
		Received: got, Complete: got == target && errs == 0, Errors: errs}
	r.Elapsed = float64(end-start.UnixNano()) / 1e9
	if r.Elapsed > 0 {
		r.MsgsPerS = float64(got) / r.Elapsed
		r.MBPerS = r.MsgsPerS * float64(*size) / 1e6
	}
	r.PubMsgsPerS = float64(*n) / pubEnd.Sub(start).Seconds()
	if cpu0 >= 0 && cpu1 >= 0 && got > 0 {
		r.CPUPerMsg = float64(cpu1-cpu0) * 1e4 / float64(got) // 100 ticks a second: 1e6/100 µs a tick
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	if !r.Complete {
		os.Exit(1)
	}
}
