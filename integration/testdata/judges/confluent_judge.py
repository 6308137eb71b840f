"""confluent-kafka (librdkafka) as an outside judge of kfollower's endpoint.

  confluent_judge.py consume BOOTSTRAP ISOLATION TOPIC:PARTITION...
      Assigns the partitions from the beginning (no group), reads each to
      its end (enable.partition.eof) and prints one JSON line per record:
      {"topic", "partition", "offset", "key", "value", "headers", "ts"},
      key, value and header values base64 or null, headers [[key, value]]
      in order. ISOLATION is read_committed, read_uncommitted or default
      (librdkafka's own default, read_committed).
  confluent_judge.py produce BOOTSTRAP MODE TOPIC
      Tries to write one record to partition 0 as a plain, idempotent or
      transactional producer (MODE) and prints one JSON line:
      {"errors": [{"name", "text", "fatal"}]}, every error the client
      reported, in order; none if the write succeeded.

Every librdkafka error is printed on stderr; any client error in consume
mode ends the run with exit status 1.
"""

import base64
import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

DEADLINE = 60  # seconds for a whole run; a judge that hangs fails


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def consume(bootstrap, isolation, parts):
    conf = {
        "bootstrap.servers": bootstrap,
        # Required by the Python client even in assign mode.
        "group.id": "kfollower-judge",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "error_cb": lambda err: print("librdkafka error:", err, file=sys.stderr),
    }
    if isolation != "default":
        conf["isolation.level"] = isolation
    c = Consumer(conf)
    tps = []
    for tp in parts:
        topic, p = tp.rsplit(":", 1)
        tps.append(TopicPartition(topic, int(p), OFFSET_BEGINNING))
    c.assign(tps)
    pending = {(tp.topic, tp.partition) for tp in tps}
    end = time.monotonic() + DEADLINE
    while pending:
        if time.monotonic() > end:
            print("not at the end within %d s: %s" % (DEADLINE, sorted(pending)), file=sys.stderr)
            return 1
        m = c.poll(1.0)
        if m is None:
            continue
        err = m.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                pending.discard((m.topic(), m.partition()))
                continue
            if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                # librdkafka looks up the coordinator of group.id even
                # in assign mode; kfollower has none (FindCoordinator is
                # refused as for a principal without group access) and the
                # consumer reads on: said, not fatal.
                print("ignored:", err, file=sys.stderr)
                continue
            print("consume error on %s-%s: %s" % (m.topic(), m.partition(), err), file=sys.stderr)
            return 1
        ts_type, ts = m.timestamp()
        print(json.dumps({
            "topic": m.topic(), "partition": m.partition(), "offset": m.offset(),
            "key": b64(m.key()), "value": b64(m.value()),
            "headers": [[k, b64(v)] for k, v in (m.headers() or [])],
            "ts": ts, "ts_type": ts_type,
        }))
    c.close()
    return 0


def produce(bootstrap, mode, topic):
    errors = []
    conf = {
        "bootstrap.servers": bootstrap,
        "error_cb": lambda err: errors.append(err),
        "message.timeout.ms": DEADLINE * 1000,
    }
    if mode == "idempotent":
        conf["enable.idempotence"] = True
    if mode == "transactional":
        conf["transactional.id"] = "kfollower-judge"
    p = Producer(conf)
    try:
        if mode == "transactional":
            p.init_transactions(DEADLINE)
            p.begin_transaction()
        p.produce(topic, value=b"must not land", partition=0,
                  on_delivery=lambda err, msg: err is not None and errors.append(err))
        p.flush(DEADLINE)
    except Exception as e:  # noqa: BLE001: a fatal error may surface wrapped
        while e is not None and not isinstance(e, KafkaException):
            e = e.__cause__
        if e is None:
            raise
        errors.append(e.args[0])
    for e in errors:
        print("librdkafka error:", e, file=sys.stderr)
    print(json.dumps({"errors": [{"name": e.name(), "text": e.str(), "fatal": e.fatal()} for e in errors]}))
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "consume":
        return consume(argv[2], argv[3], argv[4:])
    if len(argv) == 5 and argv[1] == "produce":
        return produce(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
