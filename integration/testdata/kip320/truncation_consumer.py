"""Read partition 0 of a topic from the start with confluent-kafka
(librdkafka) in assign mode, auto.offset.reset=error, and report what its
KIP-320 truncation detection says:

  READ <next offset>          after each record batch of progress
  ERROR <code> <name> <offset> <text>
                              every error the consumer returns
  LOG <facility> <text>       librdkafka log lines that name a truncation
  TIMEOUT                     when the deadline passes (exit 3)

It exits 0 after the first error or log line naming a truncation.

Usage: truncation_consumer.py BOOTSTRAP TOPIC SECONDS
"""
import logging
import sys
import time

from confluent_kafka import Consumer, TopicPartition

bootstrap, topic, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
seen = []


class Catch(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if "truncat" in text.lower():
            print("LOG", record.name, text, flush=True)
            seen.append(text)


log = logging.getLogger("librdkafka")
log.setLevel(logging.DEBUG)
log.addHandler(Catch())

c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "kip320-judge",
    "enable.auto.commit": False,
    "auto.offset.reset": "error",
    "topic.metadata.refresh.interval.ms": 500,
    "logger": log,
})
c.assign([TopicPartition(topic, 0, 0)])
deadline = time.time() + seconds
nxt = 0
while time.time() < deadline:
    msgs = c.consume(num_messages=1000, timeout=0.2)
    progressed = False
    for m in msgs:
        err = m.error()
        if err is not None:
            print("ERROR", err.code(), err.name(), m.offset(), err.str(), flush=True)
            if "truncat" in err.str().lower():
                c.close()
                sys.exit(0)
            continue
        nxt = m.offset() + 1
        progressed = True
    if progressed:
        print("READ", nxt, flush=True)
    if seen:
        c.close()
        sys.exit(0)
print("TIMEOUT", flush=True)
c.close()
sys.exit(3)
