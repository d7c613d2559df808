# A real SMTP server for payout's tests (Debian's python3-aiosmtpd): it
# listens on 127.0.0.1:PORT and writes every message it takes to DIR as
# NNNNN.eml, the envelope's recipients first in an X-Rcpt-To header.
# Usage: python3 smtpd.py PORT DIR
import os
import signal
import sys

from aiosmtpd.controller import Controller


class Spool:
    def __init__(self, folder):
        self.folder = folder
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        tmp = os.path.join(self.folder, ".%05d.tmp" % self.count)
        with open(tmp, "wb") as f:
            f.write(("X-Rcpt-To: %s\r\n" % ",".join(envelope.rcpt_tos)).encode())
            f.write(envelope.original_content or envelope.content)
        os.rename(tmp, os.path.join(self.folder, "%05d.eml" % self.count))
        return "250 OK"


def main():
    port, folder = int(sys.argv[1]), sys.argv[2]
    controller = Controller(Spool(folder), hostname="127.0.0.1", port=port, server_hostname="smtptest")
    controller.start()
    print("ready", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    controller.stop()


if __name__ == "__main__":
    main()
