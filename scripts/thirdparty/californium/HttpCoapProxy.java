/*
 * An HTTP->CoAP forward proxy made of Eclipse Californium's californium-proxy2 library, wired
 * as Californium's own demo BasicHttpForwardingProxy2 wires it (demo-apps/cf-proxy2), with the
 * two things a WoTbench run needs that the demo hard-codes: the address and port to listen on
 * (the demo binds every interface at the port of a properties file in its working directory),
 * and no response cache (every request must reach a device). Every protocol step - the HTTP/1.1
 * server (Apache HttpCore 5), the URI mapping, the HTTP->CoAP translation, the CoAP client with
 * its retransmissions - is Californium's; nothing here handles a request.
 *
 * Run in Java's single-file mode (no build step for this file), Californium's classes on the
 * class path (docs/HTTP-PROXY.md says how to get them):
 *   java -cp CALIFORNIUM_JARS HttpCoapProxy.java ADDRESS PORT
 * Requests: http://ADDRESS:PORT/proxy/coap://DEVICE:5683/PATH (RFC 8075 section 5 form).
 */
import java.net.InetSocketAddress;
import java.util.concurrent.CountDownLatch;

import org.eclipse.californium.core.config.CoapConfig;
import org.eclipse.californium.core.network.CoapEndpoint;
import org.eclipse.californium.elements.config.Configuration;
import org.eclipse.californium.elements.config.TcpConfig;
import org.eclipse.californium.elements.config.UdpConfig;
import org.eclipse.californium.proxy2.ClientSingleEndpoint;
import org.eclipse.californium.proxy2.config.Proxy2Config;
import org.eclipse.californium.proxy2.http.server.ProxyHttpServer;
import org.eclipse.californium.proxy2.resources.ForwardProxyMessageDeliverer;
import org.eclipse.californium.proxy2.resources.ProxyCoapClientResource;

public class HttpCoapProxy {
	public static void main(String[] args) throws Exception {
		if (args.length != 2) {
			System.err.println("usage: HttpCoapProxy ADDRESS PORT");
			System.exit(2);
		}
		CoapConfig.register();
		UdpConfig.register();
		TcpConfig.register();
		Proxy2Config.register();
		Configuration config = Configuration.createStandardWithoutFile();

		// the outgoing CoAP side: one endpoint (one UDP socket) for every device
		CoapEndpoint endpoint = new CoapEndpoint.Builder().setConfiguration(config).build();
		endpoint.start();   // (it also runs the HTTP side's request handling: the executor below)
		ProxyCoapClientResource coap2coap = new ProxyCoapClientResource("coap2coap", false, false,
				null, new ClientSingleEndpoint(endpoint));
		ProxyHttpServer server = ProxyHttpServer.buider().setConfiguration(config)
				.setInetSocketAddress(new InetSocketAddress(args[0], Integer.parseInt(args[1])))
				.setExecutor(endpoint)
				.setProxyCoapDeliverer(new ForwardProxyMessageDeliverer(coap2coap))
				.build();
		server.start();
		System.out.println("HTTP->CoAP proxy (Californium proxy2) at http://" + server.getInterface()
				+ "/proxy/coap://HOST:PORT/PATH");

		CountDownLatch stopped = new CountDownLatch(1);
		Runtime.getRuntime().addShutdownHook(new Thread(() -> {   // SIGTERM: close the sockets
			server.stop();
			endpoint.destroy();
			stopped.countDown();
		}));
		stopped.await();
	}
}
