// Go net/http peer over HTTP/2: "Hello, World!" on GET /, spoken as h2c with prior knowledge
// (net/http's own HTTP/2, Go 1.24's Server.Protocols). Run with GOMAXPROCS=1.
// Usage: go-h2c PORT
package main

import (
	"net/http"
	"os"
)

func main() {
	port := "8080"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	body := []byte("Hello, World!")
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	server := &http.Server{Addr: "127.0.0.1:" + port, Handler: mux, Protocols: &protocols}
	if err := server.ListenAndServe(); err != nil {
		panic(err)
	}
}
