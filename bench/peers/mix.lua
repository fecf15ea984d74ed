-- wrk script: the baseline request mix, in turn: GET /baseline11?a=13&b=42, a POST with a
-- Content-Length body "20", and the same POST chunked. Each answer is the sum (75 or 55).
local requests = {
   "GET /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\n\r\n",
   "POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n20",
   "POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n20\r\n0\r\n\r\n",
}
local i = 0

request = function()
   i = i % #requests + 1
   return requests[i]
end
