"""nginx with Debian's nchan module (libnginx-mod-nchan) on loopback: a publish/subscribe
server that notifies, for the notification sink's tests (issue 35). POST /pub publishes the
request body to channel ``ch``; GET /sub with ``Accept: text/event-stream`` subscribes to it as
Server-Sent Events (nchan's eventsource subscriber); GET /ws as a WebSocket."""
from pathlib import Path

from testkit.nginx import HEAD, Nginx, nginx_path

MODULE = Path("/usr/lib/nginx/modules/ngx_nchan_module.so")

CONF = "load_module " + str(MODULE) + ";\n" + HEAD + """  server {{
    listen {host}:{port} backlog=4096;
    location = /pub {{ nchan_publisher; nchan_channel_id ch; nchan_message_buffer_length 1000; }}
    location = /sub {{ nchan_subscriber eventsource; nchan_channel_id ch; }}
    location = /ws {{ nchan_subscriber websocket; nchan_channel_id ch; }}
    location / {{ return 200 "ok"; }}
  }}
}}
"""


def nchan_available() -> bool:
    return bool(nginx_path()) and MODULE.exists()


class Nchan(Nginx):
    conf = CONF
