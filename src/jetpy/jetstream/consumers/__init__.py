"""Consumers: the ``Consumer`` state machine and the collaborators it owns (pending acks, push
delivery, the pull queue, pacing), the ack and pull-request codecs, and ``ConsumerManager``, the
host every consumer runs in."""
