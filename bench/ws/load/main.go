// The load generator for bench/ws/run: raw WebSocket clients (RFC 6455 framing by hand, no
// library) so that the client's cost is small and the same for every server.
//
//	load echo   -url ws://127.0.0.1:PORT/echo -conns 50 -size 64 -burst 1 -duration 5s
//	    Each connection sends `burst` messages (in one write) and waits for their echoes,
//	    again and again. Prints messages echoed per second and latency percentiles (of a
//	    whole burst).
//	load fanout -url ws://127.0.0.1:PORT/chat -subscribers 100 -size 64 -window 4 -duration 5s
//	    One publisher sends text messages to a relay room, keeping `window` of them in flight
//	    (it waits for its own copies); the subscribers count what they receive.
//	    Prints messages relayed per second and deliveries (messages x receivers) per second.
//
// The last line is machine-readable: RESULT key=value ...
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type conn struct {
	c   net.Conn
	r   *bufio.Reader
	out []byte
}

func dial(rawURL string) (*conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	keyBytes := make([]byte, 16)
	rand.Read(keyBytes)
	key := base64.StdEncoding.EncodeToString(keyBytes)
	path := u.Path
	if path == "" {
		path = "/"
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", path, u.Host, key)
	r := bufio.NewReaderSize(c, 64*1024)
	status, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 101") {
		return nil, fmt.Errorf("handshake refused: %q", status)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == "\r\n" {
			break
		}
	}
	return &conn{c: c, r: r}, nil
}

var maskKey = [4]byte{0x12, 0x34, 0x56, 0x78}

// frame builds a masked client frame.
func frame(opcode byte, payload []byte) []byte {
	out := []byte{0x80 | opcode}
	n := len(payload)
	switch {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xffff:
		out = append(out, 0x80|126, byte(n>>8), byte(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	out = append(out, maskKey[:]...)
	start := len(out)
	out = append(out, payload...)
	for i := range payload {
		out[start+i] ^= maskKey[i%4]
	}
	return out
}

// read returns the next message's opcode and payload (server frames: unmasked, unfragmented
// for the messages these servers send).
func (c *conn) read(buf []byte) (byte, []byte, error) {
	var head [2]byte
	if _, err := readFull(c.r, head[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(head[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := readFull(c.r, ext[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := readFull(c.r, ext[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	if head[0]&0x40 != 0 {
		return 0, nil, errors.New("compressed frame (no extension was offered)")
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := readFull(c.r, buf); err != nil {
		return 0, nil, err
	}
	return head[0] & 0x0f, buf, nil
}

func readFull(r *bufio.Reader, buf []byte) (int, error) {
	got := 0
	for got < len(buf) {
		n, err := r.Read(buf[got:])
		got += n
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func runEcho(rawURL string, conns, size, burst int, duration time.Duration) error {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	var message []byte
	for i := 0; i < burst; i++ {
		message = append(message, frame(0x2, payload)...)
	}
	var total atomic.Int64
	latencies := make([][]time.Duration, conns)
	clients := make([]*conn, conns)
	for i := range clients {
		c, err := dial(rawURL)
		if err != nil {
			return err
		}
		clients[i] = c
	}
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(duration)
	var failure atomic.Value
	for i, c := range clients {
		wg.Add(1)
		go func(i int, c *conn) {
			defer wg.Done()
			buf := make([]byte, size)
			samples := make([]time.Duration, 0, 1<<16)
			for n := 0; ; n++ {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if _, err := c.c.Write(message); err != nil {
					failure.Store(err)
					return
				}
				for k := 0; k < burst; k++ {
					_, got, err := c.read(buf)
					if err != nil {
						failure.Store(err)
						return
					}
					if len(got) != size {
						failure.Store(fmt.Errorf("echo of %d bytes, sent %d", len(got), size))
						return
					}
				}
				if n%8 == 0 {
					samples = append(samples, time.Since(t0))
				}
				total.Add(int64(burst))
			}
			latencies[i] = samples
		}(i, c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, c := range clients {
		c.c.Close()
	}
	if err, ok := failure.Load().(error); ok {
		return err
	}
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	rate := float64(total.Load()) / elapsed.Seconds()
	fmt.Printf("echo: %d connections, %d-byte messages, bursts of %d: %.0f messages/s, p50 %v, p99 %v\n",
		conns, size, burst, rate, percentile(all, 0.5), percentile(all, 0.99))
	fmt.Printf("RESULT rate=%.0f p50_us=%d p99_us=%d\n", rate, percentile(all, 0.5).Microseconds(), percentile(all, 0.99).Microseconds())
	return nil
}

func runFanout(rawURL string, subscribers, size, window int, duration time.Duration) error {
	const marker = "bench:"
	var received atomic.Int64
	subs := make([]*conn, subscribers)
	for i := range subs {
		c, err := dial(rawURL)
		if err != nil {
			return err
		}
		subs[i] = c
	}
	publisher, err := dial(rawURL)
	if err != nil {
		return err
	}
	// Let join announcements (if a server makes them) pass.
	time.Sleep(200 * time.Millisecond)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, c := range subs {
		wg.Add(1)
		go func(c *conn) {
			defer wg.Done()
			buf := make([]byte, size+64)
			for {
				_, got, err := c.read(buf)
				if err != nil {
					return
				}
				if strings.HasPrefix(string(got[:min(len(got), len(marker))]), marker) {
					received.Add(1)
				}
			}
		}(c)
	}
	padding := strings.Repeat("x", max(0, size-len(marker)-12))
	start := time.Now()
	deadline := start.Add(duration)
	sent, echoed := 0, 0
	buf := make([]byte, size+64)
	for time.Now().Before(deadline) {
		for sent-echoed < window {
			text := fmt.Sprintf("%s%010d %s", marker, sent, padding)
			if _, err := publisher.c.Write(frame(0x1, []byte(text))); err != nil {
				return err
			}
			sent++
		}
		_, got, err := publisher.read(buf)
		if err != nil {
			return err
		}
		if strings.HasPrefix(string(got[:min(len(got), len(marker))]), marker) {
			echoed++
		}
	}
	elapsed := time.Since(start)
	publisher.c.Close()
	// Give subscribers a moment to read what is in flight, then stop.
	time.Sleep(100 * time.Millisecond)
	close(stop)
	for _, c := range subs {
		c.c.Close()
	}
	wg.Wait()
	deliveries := float64(received.Load()+int64(echoed)) / elapsed.Seconds()
	rate := float64(echoed) / elapsed.Seconds()
	fmt.Printf("fanout: %d subscribers, %d-byte messages, window %d: %.0f messages/s relayed, %.0f deliveries/s\n",
		subscribers, size, window, rate, deliveries)
	fmt.Printf("RESULT rate=%.0f deliveries=%.0f\n", rate, deliveries)
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: load echo|fanout [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	rawURL := fs.String("url", "", "ws://127.0.0.1:PORT/path")
	conns := fs.Int("conns", 50, "echo: connections")
	subscribers := fs.Int("subscribers", 100, "fanout: receiving connections")
	size := fs.Int("size", 64, "message bytes")
	window := fs.Int("window", 4, "fanout: messages in flight")
	burst := fs.Int("burst", 1, "echo: messages per write")
	duration := fs.Duration("duration", 5*time.Second, "how long to run")
	fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "echo":
		err = runEcho(*rawURL, *conns, *size, *burst, *duration)
	case "fanout":
		err = runFanout(*rawURL, *subscribers, *size, *window, *duration)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}
