#!lua flags=no-writes
-- hashlock's collector for redis_exporter's --script option:
--
--   redis_exporter --redis.addr redis://host:6379 \
--       --script docs/observability/hashlock-collector.lua
--
-- redis_exporter exports only the INFO fields it knows; this script hands
-- it every number of `INFO lock` instead. It returns a flat array of
-- alternating names and values, both strings (what the exporter reads, as
-- from HGETALL), and each pair becomes the gauge
--
--   redis_script_values{key="<INFO field name>"} <value>
--
-- with the field name exactly as INFO lock prints it, e.g.
-- `lock_lock_wait_p99_us`, `lock_waiting`, `lock_stale_grants`
-- (README, "Observing locks", lists them all). Two more keys:
--   lock_module_loaded     1 if INFO lock has the module's sections, else 0
--   lock_warning_eviction  1 while INFO lock warns that maxmemory-policy
--                          can evict locks, else 0
--
-- It writes nothing (flags=no-writes: it runs on replicas and under OOM
-- too), takes no keys (any node of a cluster), and costs one INFO lock.
-- Check it by hand with: redis-cli EVAL "$(cat hashlock-collector.lua)" 0

local info = redis.call('INFO', 'lock')
local result = {}
local loaded = 0
local eviction = 0

for line in string.gmatch(info, '[^\r\n]+') do
    local name, value = string.match(line, '^(lock_[%w_]+):(.*)$')
    if name then
        loaded = 1
        if string.match(value, '^%-?%d+%.?%d*$') then
            table.insert(result, name)
            table.insert(result, value)
        elseif name == 'lock_eviction' then
            eviction = 1
        end
    elseif string.match(line, '^# lock_') then
        loaded = 1
    end
end

table.insert(result, 'lock_module_loaded')
table.insert(result, tostring(loaded))
table.insert(result, 'lock_warning_eviction')
table.insert(result, tostring(eviction))
return result
