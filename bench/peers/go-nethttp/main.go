// Go net/http peer: "Hello, World!" on GET /, and the baseline mix (/baseline11: the sum of
// the query parameters a and b and the integer body). Run with GOMAXPROCS=1 (bench/run's
// plaintext-coresN scenarios set it to N).
// Usage: go-nethttp PORT
package main

import (
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

func main() {
	port := "8080"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	body := []byte("Hello, World!")
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	http.HandleFunc("/baseline11", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		a, _ := strconv.Atoi(q.Get("a"))
		b, _ := strconv.Atoi(q.Get("b"))
		raw, _ := io.ReadAll(r.Body)
		c, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strconv.Itoa(a + b + c)))
	})
	if err := http.ListenAndServe("127.0.0.1:"+port, nil); err != nil {
		panic(err)
	}
}
