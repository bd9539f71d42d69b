package exposition

// Family is what the table says about one metric family.
type Family struct {
	Help string // the # HELP text: what the number says, and its unit
	Type string // replaces the library's # TYPE when set (it calls some counters gauges)
	Drop bool   // left out of /metrics (a name Prometheus' lint refuses, and nothing here needs)
}

// families is the one place a family's description lives, keyed by the
// family name (no labels; a histogram's name without _bucket, _sum,
// _count). docs/cluster.md ("Metrics") explains the gateway_ families at
// more length; node/metrics_doc_test.go holds both to what /metrics shows.
var families = map[string]Family{
	// The merchant API (transport/server).
	"gateway_http_requests_total":             {Help: "Merchant API requests answered, by operation (op) and HTTP status (code); op=\"unknown\" is a path that names no operation."},
	"gateway_http_handler_panics_total":       {Help: "Requests whose handling panicked and were answered 500 5.03 (the node stays up; the log has the stack). Anything above 0 is a bug to report."},
	"gateway_http_request_duration_seconds":   {Help: "Merchant API request latency in seconds, from the request read to the answer written, by operation (op) and HTTP status (code)."},
	"gateway_forwarded_requests_total":        {Help: "Writes this follower relayed to the leader."},
	"gateway_forwarded_requests_failed_total": {Help: "Writes this follower could not relay to the leader (answered 503 6.02 or 500 5.03)."},

	// Raft and the state machine (cluster, node).
	"gateway_raft_proposal_wait_seconds": {Help: "Seconds a command waited for a Raft log entry to carry it (group commit: one entry in flight at a time)."},
	"gateway_raft_commit_seconds":        {Help: "Seconds from proposing a Raft log entry to its result applied on this node."},
	"gateway_raft_log_append_seconds":    {Help: "Seconds each fsynced append to the Raft log took on this node."},
	"gateway_raft_entry_commands":        {Help: "Commands packed into each Raft log entry (group commit)."},
	"gateway_raft_snapshot_seconds":      {Help: "Seconds each Raft snapshot took to write."},
	"gateway_raft_snapshot_bytes":        {Help: "Size in bytes of the last Raft snapshot this node wrote."},
	"gateway_fsm_apply_seconds":          {Help: "Seconds each batch of committed Raft entries took to apply to Pebble."},
	"gateway_raft_leader":                {Help: "1 while this node is the Raft leader, else 0."},
	"gateway_raft_has_leader":            {Help: "1 while this node knows a Raft leader (itself or another), else 0: 0 on every node means the cluster cannot take writes."},
	"gateway_raft_leader_changes_total":  {Help: "Times this node saw a new Raft leader since it started."},
	"gateway_raft_term":                  {Help: "This node's current Raft term."},
	"gateway_raft_commit_index":          {Help: "Highest Raft log index this node knows to be committed."},
	"gateway_raft_applied_index":         {Help: "Highest Raft log index applied to this node's state; the leader's commit index minus this is how far the node trails."},
	"gateway_disk_free_bytes":            {Help: "Bytes still free to the node on the file system of its data directory (dir=\"data\") and of its Raft log (dir=\"raft_log\")."},
	"gateway_disk_size_bytes":            {Help: "Size in bytes of the file system of the node's data directory (dir=\"data\") and of its Raft log (dir=\"raft_log\")."},

	// Orders and schedules (actors, persistence).
	"gateway_order_actors_live":        {Help: "Order actors alive on this node (each retires once it has nothing left to do)."},
	"gateway_order_reads_total":        {Help: "Reads of an order outside the Raft FSM, by where they were served from (from=\"cache\" or \"pebble\")."},
	"gateway_auto_settlements_total":   {Help: "Automatic settlements the leader committed once an order's settle delay had passed."},
	"gateway_idempotency_pruned_total": {Help: "Idempotency records the leader removed past their retention (48 h after the first answer)."},

	// The acquirer, as the leader's order actors see it (node).
	"gateway_authorizations_total":  {Help: "Authorisations the acquirer answered, by result (approved, declined with its decline code, or error: no answer, retried)."},
	"gateway_authorization_seconds": {Help: "Seconds each authorisation took at the acquirer, from the request sent to its answer or failure."},

	// The ISO 8583 link to the acquirer host (contract section 12; being
	// built alongside: described here so its families have help text the
	// day they appear).
	"gateway_acquirer_round_trip_seconds":      {Help: "Seconds from a request to the acquirer host to its answer, by message type (mti)."},
	"gateway_acquirer_timeouts_total":          {Help: "Requests to the acquirer host with no answer within --acquirer-timeout, by message type (mti)."},
	"gateway_acquirer_connections_up":          {Help: "1 while the ISO 8583 connection to the acquirer host is up, else 0."},
	"gateway_acquirer_connects_total":          {Help: "Connections made to the acquirer host."},
	"gateway_acquirer_connect_failures_total":  {Help: "Connection attempts to the acquirer host that failed (retried with backoff)."},
	"gateway_acquirer_unmatched_answers_total": {Help: "Answers from the acquirer host that matched no waiting request (duplicates, or after their request timed out)."},
	"gateway_acquirer_overloaded_total":        {Help: "Requests to the acquirer host refused at once because 10,000 already waited for answers (repeated like a timeout)."},
	"gateway_acquirer_movements_sent_total":    {Help: "Captures, reversals and refunds sent to the acquirer host, by message type (mti: 0220 and repeat 0221 captures, 0400 and repeat 0401 reversals, 0200 refunds)."},
	"gateway_acquirer_movements_pending":       {Help: "Captures, reversals and refunds this node is repeating until the acquirer host answers."},

	// Notifications (actors, persistence).
	"gateway_webhook_pending":          {Help: "Notifications in the replicated outbox, neither delivered nor failed for good (the same on every node: take max, not sum)."},
	"gateway_webhook_delivered_total":  {Help: "Notifications delivered (HTTP 200 with status ok) by this node while it led."},
	"gateway_webhook_failed_total":     {Help: "Notifications marked failed for good after their last retry, by this node while it led."},
	"gateway_webhook_delivery_seconds": {Help: "Seconds from a notification's creation to its delivery."},
	"gateway_webhook_attempts_total":   {Help: "Notification delivery attempts by result (delivered, http_status, refused, timeout, connect, bad_answer, other)."},
	"gateway_webhook_endpoints":        {Help: "Callback endpoints (scheme://host:port) with a delivery actor on this leader."},
	"gateway_webhook_endpoints_full":   {Help: "Callback endpoints on this leader whose due notifications wait in the outbox because the endpoint already holds its 1,024."},
	"gateway_webhook_pruned_total":     {Help: "Finished notifications the leader removed past --webhook-retention."},

	// Backups and the vault (node).
	"gateway_backup_last_success_timestamp_seconds": {Help: "Unix time of the last scheduled backup this node wrote and verified (0 before the first)."},
	"gateway_backup_failures_total":                 {Help: "Scheduled backups that failed on this node (the log says why)."},
	"gateway_backup_interval_seconds":               {Help: "--backup-interval in seconds (0 without --backup-dir: no scheduled backups)."},
	"gateway_vault_records_under_previous_key":      {Help: "Card blobs and merchant secrets in this node's store that the current vault key did not seal; 0 once a vault key rotation has re-sealed them all."},

	// Pebble (persistence).
	"gateway_pebble_write_stalls_total":       {Help: "Times Pebble held writes while flushes or compactions caught up."},
	"gateway_pebble_write_stall_seconds":      {Help: "Seconds each Pebble write stall lasted."},
	"gateway_pebble_block_cache_hits_total":   {Help: "Pebble block cache hits."},
	"gateway_pebble_block_cache_misses_total": {Help: "Pebble block cache misses (a block read from its file and decompressed)."},
	"gateway_pebble_block_cache_bytes":        {Help: "Bytes held in Pebble's block cache."},
	"gateway_pebble_memtable_bytes":           {Help: "Bytes in Pebble's memtables, waiting to be flushed."},
	"gateway_pebble_sstable_bytes":            {Help: "Bytes of Pebble's live sstables on disk (the Raft log and snapshots apart)."},
	"gateway_pebble_read_amplification":       {Help: "Places a Pebble point read may have to look (L0 sublevels and non-empty levels)."},
	"gateway_pebble_compaction_debt_bytes":    {Help: "Bytes Pebble estimates it must still compact to bring its levels back in shape."},
	"gateway_pebble_flushes_total":            {Help: "Pebble memtable flushes."},
	"gateway_pebble_compactions_total":        {Help: "Pebble compactions."},

	// The Go runtime, as the metrics library reports it.
	"go_cgo_calls_count":                  {Drop: true}, // a counter without _total: the lint refuses the name
	"go_cpu_count":                        {Drop: true}, // a gauge ending _count: the lint refuses the name; go_gomaxprocs stays
	"go_gc_forced_count":                  {Drop: true}, // a counter without _total
	"go_gc_cpu_seconds_total":             {Help: "CPU seconds the garbage collector has used."},
	"go_gc_mark_assist_cpu_seconds_total": {Help: "CPU seconds goroutines spent assisting the garbage collector's marking."},
	"go_gc_duration_seconds":              {Help: "Quantiles of the garbage collector's stop-the-world pause durations in seconds."},
	"go_gc_pauses_seconds":                {Help: "Garbage collector stop-the-world pauses in seconds."},
	"go_sched_latencies_seconds":          {Help: "Seconds goroutines waited runnable before they ran."},
	"go_mutex_wait_seconds_total":         {Help: "Seconds goroutines spent blocked on sync.Mutex and sync.RWMutex."},
	"go_scavenge_cpu_seconds_total":       {Help: "CPU seconds the runtime spent returning memory to the operating system."},
	"go_memlimit_bytes":                   {Help: "The Go runtime's soft memory limit in bytes (--memory-limit-mib or GOMEMLIMIT)."},
	"go_gomaxprocs":                       {Help: "GOMAXPROCS: operating system threads that may run Go code at once."},
	"go_goroutines":                       {Help: "Goroutines that currently exist."},
	"go_threads":                          {Help: "Operating system threads the Go runtime created."},
	"go_info":                             {Help: "Always 1; the version label is the Go version the binary was built with."},
	"go_info_ext":                         {Help: "Always 1; the labels give the GC percentage the runtime runs with."},
	"go_memstats_alloc_bytes":             {Help: "Bytes of allocated heap objects."},
	"go_memstats_alloc_bytes_total":       {Help: "Bytes allocated for heap objects since the process started."},
	"go_memstats_buck_hash_sys_bytes":     {Help: "Bytes of memory in profiling bucket hash tables."},
	"go_memstats_frees_total":             {Help: "Heap objects freed since the process started."},
	"go_memstats_gc_cpu_fraction":         {Help: "Fraction of the available CPU time the garbage collector used since the process started."},
	"go_memstats_gc_sys_bytes":            {Help: "Bytes of memory in garbage collection metadata."},
	"go_memstats_heap_alloc_bytes":        {Help: "Bytes of allocated heap objects."},
	"go_memstats_heap_idle_bytes":         {Help: "Bytes in idle (unused) heap spans."},
	"go_memstats_heap_inuse_bytes":        {Help: "Bytes in in-use heap spans."},
	"go_memstats_heap_objects":            {Help: "Allocated heap objects."},
	"go_memstats_heap_released_bytes":     {Help: "Bytes of heap memory returned to the operating system."},
	"go_memstats_heap_sys_bytes":          {Help: "Bytes of heap memory obtained from the operating system."},
	"go_memstats_last_gc_time_seconds":    {Help: "Time of the last garbage collection, in seconds since the Unix epoch."},
	"go_memstats_lookups_total":           {Help: "Pointer lookups the runtime performed."},
	"go_memstats_mallocs_total":           {Help: "Heap objects allocated since the process started."},
	"go_memstats_mcache_inuse_bytes":      {Help: "Bytes of allocated mcache structures."},
	"go_memstats_mcache_sys_bytes":        {Help: "Bytes of memory obtained from the operating system for mcache structures."},
	"go_memstats_mspan_inuse_bytes":       {Help: "Bytes of allocated mspan structures."},
	"go_memstats_mspan_sys_bytes":         {Help: "Bytes of memory obtained from the operating system for mspan structures."},
	"go_memstats_next_gc_bytes":           {Help: "Heap size in bytes the next garbage collection aims at."},
	"go_memstats_other_sys_bytes":         {Help: "Bytes of memory in miscellaneous off-heap runtime allocations."},
	"go_memstats_stack_inuse_bytes":       {Help: "Bytes in stack spans."},
	"go_memstats_stack_sys_bytes":         {Help: "Bytes of stack memory obtained from the operating system."},
	"go_memstats_sys_bytes":               {Help: "Bytes of memory the Go runtime obtained from the operating system."},

	// The process, as the metrics library reads it from /proc.
	"process_cpu_seconds_total":            {Help: "CPU seconds the process used, user and system."},
	"process_cpu_seconds_user_total":       {Help: "CPU seconds the process used in user mode."},
	"process_cpu_seconds_system_total":     {Help: "CPU seconds the process used in the kernel."},
	"process_major_pagefaults_total":       {Help: "Page faults of the process that read from disk."},
	"process_minor_pagefaults_total":       {Help: "Page faults of the process served without reading from disk."},
	"process_num_threads":                  {Help: "Operating system threads of the process."},
	"process_resident_memory_bytes":        {Help: "Resident memory of the process in bytes."},
	"process_resident_memory_anon_bytes":   {Help: "Resident anonymous memory (heap, stacks) of the process in bytes."},
	"process_resident_memory_file_bytes":   {Help: "Resident file-backed memory of the process in bytes."},
	"process_resident_memory_shared_bytes": {Help: "Resident shared memory of the process in bytes."},
	"process_resident_memory_peak_bytes":   {Help: "Peak resident memory of the process in bytes."},
	"process_virtual_memory_bytes":         {Help: "Virtual memory of the process in bytes."},
	"process_virtual_memory_peak_bytes":    {Help: "Peak virtual memory of the process in bytes."},
	"process_start_time_seconds":           {Help: "Start time of the process in seconds since the Unix epoch."},
	"process_open_fds":                     {Help: "File descriptors the process holds open."},
	"process_max_fds":                      {Help: "Most file descriptors the process may hold open."},
	// The library types these cumulative counts as gauges.
	"process_io_read_bytes_total":                   {Help: "Bytes the process read, from any source.", Type: "counter"},
	"process_io_written_bytes_total":                {Help: "Bytes the process wrote, to any destination.", Type: "counter"},
	"process_io_read_syscalls_total":                {Help: "Read system calls of the process.", Type: "counter"},
	"process_io_write_syscalls_total":               {Help: "Write system calls of the process.", Type: "counter"},
	"process_io_storage_read_bytes_total":           {Help: "Bytes the process read from storage.", Type: "counter"},
	"process_io_storage_written_bytes_total":        {Help: "Bytes the process wrote to storage.", Type: "counter"},
	"process_pressure_cpu_waiting_seconds_total":    {Help: "Seconds some of the process's tasks waited for CPU (pressure stall information)."},
	"process_pressure_cpu_stalled_seconds_total":    {Help: "Seconds all of the process's tasks were stalled on CPU (pressure stall information)."},
	"process_pressure_io_waiting_seconds_total":     {Help: "Seconds some of the process's tasks waited for I/O (pressure stall information)."},
	"process_pressure_io_stalled_seconds_total":     {Help: "Seconds all of the process's tasks were stalled on I/O (pressure stall information)."},
	"process_pressure_memory_waiting_seconds_total": {Help: "Seconds some of the process's tasks waited for memory (pressure stall information)."},
	"process_pressure_memory_stalled_seconds_total": {Help: "Seconds all of the process's tasks were stalled on memory (pressure stall information)."},
}
