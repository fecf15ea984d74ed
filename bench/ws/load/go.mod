module saker.bench/ws-load

go 1.21
