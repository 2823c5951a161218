"""jetpy.server.jscluster: JetStream on a cluster of servers (nats-server's "clustered mode").

Owns: the meta group and its assignments, placing streams on servers, each replicated stream as
a Raft group on the servers it is placed on, and the ``$JS.API`` requests that a cluster answers
differently from a single server. Must not know: Raft's rules (``jetpy.raft``), how a group runs
(``jetpy.server.nrg``), a stream's rules (``jetpy.jetstream.stream``), the wire.

The design (decisions the following slices keep):

* **The meta group** (``_meta_``, as nats-server names it) is a Raft group of every JetStream
  server of the cluster. A server without its log asks the others (:mod:`.forming`): it joins
  a group that runs as a new member, else founds it with the JetStream servers it knows once
  they are at least as many as its routes name (two at least), have not changed for a settle
  period and every one of them reports the same set (routes to a seed only are enough: they
  gossip the rest). Its state machine (:mod:`.meta`) holds the assignments: for each
  stream its config, the servers it is placed on (``peers``, server names), the name of its Raft
  group (``S-R<n>F-<random>``, nats-server's form) and when it was created. Changes are entries
  of the meta log (add a stream, remove it), decided by the meta leader and applied in the same
  order on every server; each server reacts to an applied assignment that names it by creating
  its replica (the stream's store and its member of the stream's group) and to a removal by
  deleting them. Consumer assignments are in the same state machine (a stream, a name, a
  config, the servers, a group ``C-R<n>F-<random>``), decided by the meta leader
  (:mod:`.consumer_api`); a removed stream takes its consumers.
* **Accounts.** One meta group serves every account, as nats-server's does: each assignment
  names its account (:mod:`.assignments`; one written before accounts names none and is the
  global account's, ``$G``, so existing meta logs and snapshots read as they were), the meta
  state holds them by account then name (two accounts may each have a stream ORDERS), and
  every account with JetStream on a server has an :class:`~.account.AccountScope` there: its
  engine holds the account's replicas (stores under the account's directory, subjects in its
  broker), its consumer groups the account's consumers, and its ``$JS.API.>`` is decided
  against the account's assignments alone, its JetStream limits checked by the meta leader
  against them before proposing (:mod:`.limits`, nats-server's rules: a stream's
  ``max_bytes`` reserved times its replicas), and its ``max_memory``/``max_storage`` by a
  stream's leader before it proposes a published message (:mod:`.usage`: each stream's bytes
  times its replicas, as ``$JS.API.INFO`` reports them; the servers report what their replicas
  hold). The servers' internal requests about a stream or
  a consumer name its account (``$JSC.SI.<account>.<stream>``...).
* **API requests reach every server** (each subscribes ``$JS.API.>`` in every account with
  JetStream, and the routes carry a request to all of them); exactly one answers each: the meta leader those about assignments
  (``STREAM.CREATE``, ``UPDATE``, ``DELETE``, ``NAMES``, ``LIST`` with each stream's info
  gathered from its leader, ``$JS.API.INFO`` with the usage gathered so, errors for unknown
  streams), a stream's leader those about its
  contents (``STREAM.INFO``, ``MSG.GET``, and ``PURGE``/``MSG.DELETE``, which it checks and
  proposes to the stream's group); the others raise
  :class:`~jetpy.jetstream.api.router.Elsewhere` and stay silent. A created stream is answered
  by its first leader once elected (the client's reply subject travels in the assignment, as
  nats-server's does), so a client that publishes right after its create finds a leader. An
  update is recorded in the meta group, then put in the stream's own log by its leader, so
  every replica changes limits at the same message, and that leader answers it.
* **Placement** is the meta leader's decision, made before proposing (it is part of the
  assignment, so every server applies the same one): the servers holding the fewest
  assignments among those the stream's ``placement {cluster, tags}`` allows, ties broken at
  random (:mod:`.placement`; the servers' ``server_tags`` are asked of them when needed).
* **An R1 stream has no Raft group** (nats-server's way): the server it is placed on holds it
  as a plain local stream (:class:`.local.LocalStream`), through the single server's path (the
  engine's ingest: decided, stored, PubAck once the store is synced; purges, deletes and config
  changes applied at once, durable before the answer). It has the interface of a replica
  (:class:`.streams.StreamReplica`) the service, the API and the consumer groups use (it always
  leads; its info names its server as leader with no replicas; its direct gets are answered;
  its work-queue consumers' acks remove at once), so they do not tell the two apart (the type
  ``local.Replica``); only the service's changes of placement do. A server holds it so when the
  stream's newest assignment places it there alone and no group directory of it is left (a
  restart replaying the meta log goes straight to the newest placement, and skips an
  assignment removed since: a store of that name is a later stream's). Scaled up, the holder
  founds the stream's group alone over its store (``founded_from_store``: the store's state is
  the state before the log's first entry) and leads it; the group takes no one in before it
  compacted its log once (``RaftGroup.snapshot_before_join``), so the servers newly placed
  join, are handed that snapshot and fetch the messages as any replica behind a snapshot does.
  Scaled down to one server, the remaining leader removes the others from the group as for any
  scale-down, and once the group is itself alone and its log applied the R1 config it stops
  the group, syncs the store (the log was its write-ahead log), deletes the group's files and
  holds the stream as a local one (:mod:`.placements`). Moved to another server
  (``STREAM.PEER.REMOVE``, ``SERVER.REMOVE``), the old server founds the group the same way and
  leaves it once the new one (which joins, as its store is not there yet) leads it; the new one
  removes it only once it fetched every message, then settles as R1.
* **A replicated stream is a Raft group of its replicas**. The group's leader alone
  subscribes the stream's subjects (``StreamRegistry.listening``, told again on every change of
  leader), so a publish elsewhere is routed to it only; it gathers those of
  one turn of its loop into one proposal (``PubBatch``, up to 512 messages or 256 KiB), stamps
  it with its clock and proposes it (:mod:`.streams`); the batch's acks are the result of
  applying it, sent together. When the entry is committed (a quorum has it in its
  Raft log on disk: every member fsyncs before it acknowledges) every replica applies it with
  :meth:`jetpy.jetstream.registry.StreamRegistry.apply_published`, which runs the very
  ``Stream.process`` a single server runs (validation, ``Nats-Expected-*``, de-duplication,
  rollups, limits, TTLs), with the leader's timestamp instead of its own clock. So deciding is
  deterministic and happens once per replica at apply time, in log order, which makes two
  publishes racing on one ``Nats-Msg-Id`` or one ``Nats-Expected-Last-Sequence`` correct with no
  in-flight bookkeeping on the leader (nats-server decides on the leader, tracking what it has
  proposed but not applied). The PubAck is the result of the leader's own apply: it leaves only
  once a quorum has the message on disk and it applied. The stream's store is synced by the
  group commit afterwards: the Raft log is its write-ahead log.
* **Restarts replay the log.** A replica's store and its Raft log are written apart, so a
  replica coming back may hold messages from entries it is about to be given again. Each
  message is applied with a time stamp that rises with the log (its entry's, or one more than
  the previous message's: a function of the log, the same on every replica), so an entry whose
  time stamp is not after the store's last message's was decided before the restart (stored or
  refused) and is skipped, as are purges, deletes and config changes met before that point;
  de-duplication is re-learnt as of that time stamp rather than the clock. The time stamp is
  the store's ``last_ts``, that of its last sequence's message even once removed (a work
  queue's acknowledged one, a purge, an expiry), durable with that sequence; a store moved on
  past its end without the messages (onto a snapshot of an emptied store, a catch-up through
  removed last messages) is given the time stamp of the last one where it was stored (the
  snapshot's, the answering replica's), else an older one would let the entries that had
  published them apply again, storing them a second time at new sequences.
* **Expiry** (``max_age``, ``Nats-TTL``) goes through the stream's log: a subject delete
  marker is a message, and one left by each replica's own timer would take a different sequence
  on each (and, stamped with that server's clock, break the replay rule above); and what expiry
  removed decides later entries (``Nats-Expected-Last-Subject-Sequence``, ``discard: new``), so
  a replica expiring sooner or later than the others (one restarted, before it replays its log)
  would decide them otherwise. The leader proposes an expiry when one is due (``ExpireOp``,
  stamped as a message is) and every replica removes what is due at the entry's time stamp and
  leaves the markers that makes, at that time stamp; until its replica takes it, a replicated
  stream expires nothing on a server (``ExpiryTimer.log_owned``).
* **Snapshots hold no message** (:mod:`.catchup`). Every group snapshots and compacts its log
  (``SNAPSHOT_ENTRIES``/``SNAPSHOT_BYTES`` unless the Raft config says otherwise). A stream's
  snapshot is taken after its store is synced and names what the store holds (sequence range,
  removed sequences), the last applied time stamp and the config; restoring one the store
  already holds (a restart) only sets the time stamp, and the replay rule above does the rest.
  A replica handed its leader's snapshot (it fell behind the leader's compacted log) drops
  what the snapshot says was removed and fetches the messages it lacks from any replica not
  itself behind, keeping their sequences (a removed one is a skipped sequence), as nats-server's
  stream catch-up does, through all that replica holds rather than the snapshot's last
  sequence only (what it removed since decided the entries in between: :mod:`.catchup`); until it has them it holds every later entry (and puts them in any
  snapshot it takes meanwhile) and, if it leads, refuses publishes. The meta group's snapshot
  is its assignments; restoring one hands them to the server as assignments again.
* **A consumer is a Raft group** of some of its stream's servers (all of them for the stream's
  replicas; ``num_replicas`` 0 is the stream's, an ephemeral one R1). Its leader runs the single
  server's consumer engine and alone subscribes its pull-request, ack and flow-control
  subjects; the state (delivered and ack floor sequences, pending acks with delivery counts)
  goes through the group as changes gathered per loop turn (:mod:`.consumers`), never an entry
  per message. A new leader first puts an epoch in the log (every earlier change applied, a
  deposed leader's later ones ignored) and waits for its server's stream replica to hold every
  message the state names; an ack with a reply (AckSync) is answered once the change holding it
  applied. So a confirmed ack is never delivered again, no delivery is skipped, and what was in
  flight is delivered again after the ack wait. What a work-queue stream's consumer acknowledged
  is removed through the stream's log (a proposal to the stream's group from the consumer's
  leader, wherever the stream's leader is); a removal lost on the way (an election, a kill) is
  made again by the consumer's leader, which looks every second for messages at or below its
  replicated ack floor that the stream still holds. A JetStream delivery to a client on another
  server crosses the route on its inbox with the message's subject after an ``@`` in the ack
  reply, as nats-server sends it.
* **An R1 consumer has no Raft group** (nats-server's way; ``num_replicas`` 1, or 0 on an R1
  stream, and every ephemeral one but an interest stream's): the server it is placed on runs the
  single server's consumer (:mod:`.local_consumer`), its state written to its own file in the
  stream's store there as a single server's durable's (an ephemeral's too), read back after a
  restart; its inactivity deletes it through the meta group and its acks go to the stream as a
  replicated consumer's do; a follower of a replicated stream delivers only what the stream's
  group applied. It has the interface of a replica (the type ``local_consumer.HeldConsumer``),
  so the API, interest retention and backups do not tell the two apart. Scaled up (or moved),
  its server founds the consumer's group alone from its state (the group's first snapshot,
  taken before anyone joins, hands it to the servers newly placed); a group scaled down to one
  server settles back once it is that member alone and runs there (:mod:`.consumer_groups`:
  the state written to the file before the group's files go). A server holds a consumer so
  when it is placed there alone and no group directory of it is left, unless it was placed
  there by a move whose group it has not left yet (no file of it there).
* **Interest retention** (:mod:`.interest`) is the stream's leader's decision, made through
  the stream's log as a work-queue's removals are: an interest stream's consumers are on every
  server of the stream (nats-server's rule, an ephemeral one too), so the leader's server holds
  every consumer's replicated state, and a message goes once each consumer whose filters match
  it acknowledged it as that state says. The leader looks when a message is stored, when a
  consumer's state change applies on its server, and every second through the stream; no
  replica removes anything on its own (each runs the engines only of the consumers it leads).
  A message no consumer wants is stored, then removed so, as nats-server does not keep it.
* **Direct gets** are answered by one replica: each subscribes its stream's direct-get subjects
  in one queue group (``_sys_``) once current, and the engine's own direct-get handler answers
  nothing on a cluster.

* **Stepdowns** (:mod:`.stepdown`) hand a group's leadership to a chosen connected voter and
  answer once it took it: a stream's by its leader (an API route), the meta group's by the meta
  leader from the system account (:mod:`.system_api`, which also removes a server from the
  cluster: its streams placed elsewhere, then its meta member removed). **Reports** (:mod:`.report`) build the
  ``cluster`` blocks and ``/jsz``'s ``meta_cluster`` from the groups' status on this server.

* **Placement changes** (a stream's replicas scaled by an update, ``STREAM.PEER.REMOVE``) are
  an update of the assignment's ``peers`` in the meta group: a server newly named starts its
  replica as a new member that asks to join (``joined``), the stream's leader removes the
  members no longer named, and those leave once removed (:mod:`.membership`). The stream's
  consumers follow it in the same meta entry (:mod:`.consumer_placement`: nats-server's rules
  for which keep the stream's count and which are capped by it), their groups changing
  members the same way (:mod:`.consumer_groups`); a consumer's own ``num_replicas`` changed
  by an update too. An update of the stream's ``placement`` moves it so: the servers it no
  longer allows are replaced by others it allows (``moved``), all in one entry; a leader
  removes a replaced voter only while as many voters as servers placed remain, so the new
  members (learners until caught up) become voters before the old ones go. Another
  placement update is refused until the group is on the servers placed (10124).

* **Mirrors and sources** are run by the stream's leader (:mod:`.copiers`: the single server's
  mirror or sources, their copies proposed rather than stored) and every copy goes through the
  stream's group (:mod:`.copying`), so what was copied is replicated state: a new leader opens
  a copying epoch in the log, and once it applied copies on from what its store holds; copies
  of an older epoch (a deposed leader's) are ignored, and a refused copy closes the epoch (the
  leader starts over from the store), so there is no duplicate and no gap. Their consumers
  on an origin are the origin leader's own, outside the meta group (:mod:`.origin_api`), and
  a stream's replicas share its identity (its group's random part). A mirror with
  ``mirror_direct`` has its leader answer its origin's direct gets once caught up.

* **Backups** (:mod:`.backups`): a stream's snapshot is its leader's (the single server's
  sender, its chunks and flow control), with every durable consumer of the stream and its
  replicated state (this server's replica's, or its leader's for one placed elsewhere). A
  restore (:mod:`.restores`) is received by the meta leader as a single server receives it; the
  restored store is then assigned to its server as an R1 stream (held as after a restart), the
  archive's consumers assigned there with their state (``ConsumerAssignment.state``: where every
  replica of the consumer starts), and a replicated stream scaled up from it as above.

Not yet: restoring a mirror or a stream with sources
(refused), or onto servers the meta leader is not one of (the chunks go to the meta leader,
where nats-server sends them to the stream's server).
A stream's
snapshot syncs its store on the event loop (once per ``SNAPSHOT_ENTRIES`` entries: the
``StateMachine`` protocol has no asynchronous preparation step yet). The id-to-name map of
members that joined under a new id is learnt from their join requests and the servers'
answers and kept in a file per server (:mod:`.forming`), not in the meta log: a server whose
store was lost names such a member by its id while that member is down.

A server runs clustered JetStream when it has JetStream and a cluster (``jetpy-server -js``
with ``--cluster``/``cluster {}`` and a ``server_name``), with nats-server's Raft timers
(``GroupConfig``'s defaults); an embedder passes ``Server(..., raft_config=...)`` for others
(the tests' fast timers).
"""

from jetpy.server.jscluster.service import ClusteredJetStream

__all__ = ["ClusteredJetStream"]
