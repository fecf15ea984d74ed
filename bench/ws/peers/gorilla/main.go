// The Go peer for bench/ws/run: gorilla/websocket serving the same two endpoints as saker's
// examples, with the library's recommended settings.
//   /echo  every message is sent back (like examples/ws-echo.zig)
//   /chat  every text message is relayed to every member (like examples/ws-chat.zig), using a
//          PreparedMessage so the frame is built once per relay
// Usage: gorilla PORT
package main

import (
	"log"
	"net/http"
	"os"
	"sync"

	"github.com/gorilla/websocket"
)

var upgrader = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096}

func echo(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for {
		kind, message, err := c.ReadMessage()
		if err != nil {
			return
		}
		if err := c.WriteMessage(kind, message); err != nil {
			return
		}
	}
}

type member struct {
	mu   sync.Mutex
	conn *websocket.Conn
}

type room struct {
	mu      sync.Mutex
	members map[*member]struct{}
}

func (rm *room) relay(message []byte) {
	prepared, err := websocket.NewPreparedMessage(websocket.TextMessage, message)
	if err != nil {
		return
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	for m := range rm.members {
		m.mu.Lock()
		m.conn.WritePreparedMessage(prepared)
		m.mu.Unlock()
	}
}

func (rm *room) serve(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	m := &member{conn: c}
	rm.mu.Lock()
	rm.members[m] = struct{}{}
	rm.mu.Unlock()
	defer func() {
		rm.mu.Lock()
		delete(rm.members, m)
		rm.mu.Unlock()
		c.Close()
	}()
	for {
		kind, message, err := c.ReadMessage()
		if err != nil {
			return
		}
		if kind == websocket.TextMessage {
			rm.relay(message)
		}
	}
}

func main() {
	rm := &room{members: map[*member]struct{}{}}
	http.HandleFunc("/echo", echo)
	http.HandleFunc("/chat", rm.serve)
	log.Fatal(http.ListenAndServe("127.0.0.1:"+os.Args[1], nil))
}
