/* CMosquitto: libmosquitto, the MQTT client library of the mosquitto project, for notify-bridge.
 * A system module like CDBus: the Debian package libmosquitto-dev provides the header and the
 * library; nothing of it is copied here. */
#include <mosquitto.h>
