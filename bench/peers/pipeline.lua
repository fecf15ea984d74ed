-- wrk script: sends DEPTH requests (GET /) per write; wrk counts each response.
-- Usage: wrk -s pipeline.lua ... -- DEPTH
init = function(args)
   local depth = tonumber(args[1]) or 16
   local requests = {}
   for i = 1, depth do requests[i] = wrk.format(nil, "/") end
   pipelined = table.concat(requests)
end

request = function()
   return pipelined
end
